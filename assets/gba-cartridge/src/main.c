/* Parcel Quest Advance: the Oak's Parcel errand at 240x160, written from scratch for oakwatch.
 * The world is the GB cartridge's (ACORN TOWN, NORTH PATH, MAPLE CITY); the story's state changes
 * happen at FireRed's story moments and land where FireRed keeps them (ram.c, layout_firered.h). */
#include "game.h"
#include "gfx.h"

#if defined(LAYOUT_EMERALD)
/* the Emerald build's course (course_emerald.inc): one more map, drawn from art/course.txt */
extern const u8 gfx_course[MAP_W * MAP_H];
#define MAP_COURSE MAP_COUNT
#define MAP_CELLS(m) ((m) == MAP_COURSE ? gfx_course : gfx_maps[m])
#define WILD_MAP MAP_COURSE
static void course_on_load(u8 map, u8 *b);
static void course_enter(void);
static void course_talk(void);
static const char *course_name(void);
static const char *course_trainer_name(void);
static u8 course_trainer;
#else
#define MAP_CELLS(m) gfx_maps[m]
#define WILD_MAP MAP_NORTH_PATH
#endif

/* ------------------------------------------------------------------ world */

enum { FACE_DOWN, FACE_UP, FACE_LEFT, FACE_RIGHT };

static const u8 map_ids[MAP_COUNT][2] = {
    {MAPID_HOUSE_2F}, {MAPID_HOUSE_1F}, {MAPID_TOWN}, {MAPID_LAB}, {MAPID_ROUTE}, {MAPID_CITY}, {MAPID_SHOP},
};

typedef struct { u8 map, x, y, to_map, to_x, to_y, face; } Warp;
#if defined(LAYOUT_EMERALD)
static const Warp warps[] = {
    {0, 16, 4, 1, 15, 4, FACE_LEFT}, {1, 16, 4, 0, 15, 4, FACE_LEFT},
    {1, 14, 13, 2, 3, 6, FACE_DOWN}, {1, 15, 13, 2, 3, 6, FACE_DOWN},
    {2, 3, 5, 1, 14, 12, FACE_UP},
    {2, 9, 0, MAP_COURSE, 10, 9, FACE_UP}, {2, 10, 0, MAP_COURSE, 10, 9, FACE_UP},
    {MAP_COURSE, 9, 5, MAP_COURSE, 10, 9, FACE_UP}, {MAP_COURSE, 10, 5, MAP_COURSE, 10, 9, FACE_UP},
    {MAP_COURSE, 11, 5, MAP_COURSE, 10, 9, FACE_UP},
};
#else
static const Warp warps[] = {
    {0, 16, 4, 1, 15, 4, FACE_LEFT}, {1, 16, 4, 0, 15, 4, FACE_LEFT},
    {1, 14, 13, 2, 3, 6, FACE_DOWN}, {1, 15, 13, 2, 3, 6, FACE_DOWN},
    {2, 3, 5, 1, 14, 12, FACE_UP}, {2, 16, 11, 3, 9, 12, FACE_UP},
    {3, 9, 13, 2, 16, 12, FACE_DOWN}, {3, 10, 13, 2, 16, 12, FACE_DOWN},
    {2, 9, 0, 4, 9, 16, FACE_UP}, {2, 10, 0, 4, 10, 16, FACE_UP},
    {4, 9, 17, 2, 9, 2, FACE_DOWN}, {4, 10, 17, 2, 10, 2, FACE_DOWN},
    {4, 14, 0, 5, 14, 16, FACE_UP}, {4, 15, 0, 5, 15, 16, FACE_UP},
    {5, 14, 17, 4, 14, 1, FACE_DOWN}, {5, 15, 17, 4, 15, 1, FACE_DOWN},
    {5, 16, 11, 6, 10, 8, FACE_UP},
    {6, 10, 9, 5, 16, 12, FACE_DOWN}, {6, 11, 9, 5, 16, 12, FACE_DOWN},
};
#endif

enum { A_MOM, A_PROF, A_RIVAL, A_BALL1, A_BALL2, A_BALL3, A_GIRL, A_MAN, A_CLERK,
#if defined(LAYOUT_EMERALD)
       A_GUIDE,
#endif
       ACTOR_COUNT };
typedef struct { u8 map, x, y; u16 obj; u8 bank; } Actor;
static const Actor actors[ACTOR_COUNT] = {
    {1, 11, 7, OBJ_MOM, BANK_RED}, {3, 9, 4, OBJ_PROF, BANK_PROF}, {3, 6, 6, OBJ_RIVAL, BANK_RIVAL},
    {3, 10, 5, OBJ_BALL, BANK_RED}, {3, 11, 5, OBJ_BALL, BANK_RED}, {3, 12, 5, OBJ_BALL, BANK_RED},
    {2, 12, 14, OBJ_GIRL, BANK_FLOWER}, {5, 8, 7, OBJ_MAN, BANK_WOOD}, {6, 8, 4, OBJ_CLERK, BANK_BLUE},
#if defined(LAYOUT_EMERALD)
    {MAP_COURSE, 11, 8, OBJ_MAN, BANK_WOOD},
#endif
};

typedef struct { u8 map, x, y; const char *text; } Sign;
static const Sign signs[] = {
    {0, 7, 4, "A show about parcels is on\nTV. How exciting!"},
    {2, 2, 8, "ACORN TOWN\nWhere every journey begins."},
    {2, 18, 12, "PROF. HAZEL'S CRITTER LAB"},
    {2, 15, 5, "KIT'S HOUSE\nIt's locked."},
    {4, 3, 11, "NORTH PATH\nNorth: MAPLE CITY\nSouth: ACORN TOWN"},
    {5, 3, 9, "MAPLE CITY\nA town of busy traders."},
    {5, 3, 4, "It's locked."},
    {5, 15, 4, "It's locked."},
#if defined(LAYOUT_EMERALD)
    {MAP_COURSE, 3, 12, "\6"},
#endif
};

/* the species in the left, middle and right ball; VAR_STARTER_MON's value for each (vars.h:
 * 0 Bulbasaur = grass, 1 Squirtle = water, 2 Charmander = fire); the rival takes the one strong
 * against the player's */
static const u16 ball_species[3] = {SPECIES_GRASS, SPECIES_FIRE, SPECIES_WATER};
static const u16 ball_starter_var[3] = {0, 2, 1};
static const u8 rival_ball_of[3] = {1, 2, 0};

static u8 cur_map, px, py, facing;
static u8 picked_ball; /* the ball being looked at (0..2) */

/* ------------------------------------------------------------------ video */

#define SB_MAP 28 /* BG0: 64x64 tiles, screenblocks 28..31 */
#define SB_UI 27  /* BG1: 32x32 tiles (text box, battle screen) */
#define OAM ((volatile u16 *)0x07000000)
#define PAL_OBJ ((volatile u16 *)0x05000200)
#define OBJ_VRAM ((volatile u32 *)0x06010000)

static s16 scroll_x, scroll_y;

static void put_map_tile(int tx, int ty, u16 entry)
{
    int sb = SB_MAP + (tx >= 32) + 2 * (ty >= 32);
    SCREENBLOCK(sb)[(ty & 31) * 32 + (tx & 31)] = entry;
}

static void draw_cell(int cx, int cy, u8 meta)
{
    put_map_tile(2 * cx, 2 * cy, gfx_meta[meta][0]);
    put_map_tile(2 * cx + 1, 2 * cy, gfx_meta[meta][1]);
    put_map_tile(2 * cx, 2 * cy + 1, gfx_meta[meta][2]);
    put_map_tile(2 * cx + 1, 2 * cy + 1, gfx_meta[meta][3]);
}

static void ui_put(int x, int y, u16 entry) { SCREENBLOCK(SB_UI)[y * 32 + x] = entry; }

static void ui_clear(int y0, int y1)
{
    for (int y = y0; y < y1; y++)
        for (int x = 0; x < 32; x++)
            ui_put(x, y, 0);
}

static void video_init(void)
{
    REG_DISPCNT = 0x0080; /* forced blank while loading */
    for (int i = 0; i < GFX_PALETTE_LEN; i++) {
        PAL_BG[i] = gfx_palette[i];
        PAL_OBJ[i] = gfx_palette[i];
    }
    PAL_BG[0] = 0x0000;
    volatile u32 *chars = (volatile u32 *)0x06000000;
    for (int i = 0; i < GFX_TILE_COUNT * 8; i++)
        chars[i] = gfx_tiles[i];
    for (int i = 0; i < GFX_OBJ_TILE_COUNT * 8; i++)
        OBJ_VRAM[i] = gfx_obj_tiles[i];
    for (int i = 0; i < 128; i++) {
        OAM[i * 4] = 0x0200; /* hidden */
        OAM[i * 4 + 1] = 0;
        OAM[i * 4 + 2] = 0;
    }
    ui_clear(0, 32);
    REG_BG0CNT = 0x0001 | (SB_MAP << 8) | 0xC000; /* priority 1, 64x64 */
    REG_BG1CNT = 0x0000 | (SB_UI << 8);           /* priority 0, 32x32 */
    REG_DISPCNT = 0x0000 | 0x0100 | 0x0200 | 0x1000 | 0x0040; /* mode 0, BG0, BG1, OBJ 1D */
}

/* ------------------------------------------------------------------ text */

/* FireRed's character code for ASCII (pret/pokefirered charmap.txt) */
static u8 fr_code(char c)
{
    if (c >= 'A' && c <= 'Z')
        return (u8)(0xBB + (c - 'A'));
    if (c >= 'a' && c <= 'z')
        return (u8)(0xD5 + (c - 'a'));
    if (c >= '0' && c <= '9')
        return (u8)(0xA1 + (c - '0'));
    switch (c) {
    case '!': return 0xAB;
    case '?': return 0xAC;
    case '.': return 0xAD;
    case '-': return 0xAE;
    case ',': return 0xB8;
    case '\'': return 0xB4;
    case ':': return 0xF0;
    case '/': return 0xBA;
    case '(': return 0x5C;
    case ')': return 0x5D;
    case '&': return 0x2D;
    case '+': return 0x2E;
    case '\n': return 0xFE;
    default: return 0x00;
    }
}

static u8 rival_species(void);
static u16 wild_species;

/* ASCII with placeholders -> FireRed codes, 0xFF-terminated. \1 the player's first creature,
 * \2 the rival's, \3 the ball being looked at, \4 the wild creature */
static int encode(u8 *dst, int cap, const char *s)
{
    int n = 0;
    for (; *s && n < cap - 1; s++) {
        const char *sub = 0;
        if (*s == '\1') sub = species_name(party_count() ? party_species(0) : 0);
        else if (*s == '\2') sub = species_name(rival_species());
        else if (*s == '\3') sub = species_name(ball_species[picked_ball]);
        else if (*s == '\4') sub = species_name(wild_species);
#if defined(LAYOUT_EMERALD)
        else if (*s == '\5') sub = course_trainer_name();
        else if (*s == '\6') sub = course_name();
#endif
        if (sub) {
            while (*sub && n < cap - 1)
                dst[n++] = fr_code(*sub++);
        } else {
            dst[n++] = fr_code(*s);
        }
    }
    dst[n] = 0xFF;
    return n;
}

/* the text box: BG1 rows 14..19, four lines of 28 characters */
static void draw_box(void)
{
    ui_put(0, 14, TILE_BOX_TL);
    ui_put(29, 14, TILE_BOX_TR);
    ui_put(0, 19, TILE_BOX_BL);
    ui_put(29, 19, TILE_BOX_BR);
    for (int x = 1; x < 29; x++) {
        ui_put(x, 14, TILE_BOX_T);
        ui_put(x, 19, TILE_BOX_B);
    }
    for (int y = 15; y < 19; y++) {
        ui_put(0, y, TILE_BOX_L);
        ui_put(29, y, TILE_BOX_R);
        for (int x = 1; x < 29; x++)
            ui_put(x, y, TILE_PAPER);
    }
}

static void draw_text_at(int x0, int y, const u8 *s, int width)
{
    int x = x0;
    for (; *s != 0xFF; s++) {
        if (*s == 0xFE || *s == 0xFB || *s == 0xFA) {
            y++;
            x = x0;
            continue;
        }
        if (x < x0 + width)
            ui_put(x++, y, gfx_font[*s] ? gfx_font[*s] : TILE_PAPER);
    }
}

static void box_show(const u8 *encoded)
{
    draw_box();
    draw_text_at(1, 15, encoded, 28);
}

static void box_hide(void) { ui_clear(14, 20); }

/* A field message: expanded into gStringVar4 and shown from there, sMessageBoxType NORMAL while
 * the box is up (src/field_message_box.c) */
static void field_message(const char *s)
{
    encode((u8 *)ADDR_STRING_VAR4, 1000, s);
    *(volatile u8 *)ADDR_MSGBOX_TYPE = MSGBOX_NORMAL;
    box_show((const u8 *)ADDR_STRING_VAR4);
}

static void field_message_close(void)
{
    *(volatile u8 *)ADDR_MSGBOX_TYPE = MSGBOX_HIDDEN;
    box_hide();
}

/* ------------------------------------------------------------------ map and sprites */

static int actor_visible(int a)
{
    if (actors[a].map != cur_map)
        return 0;
    switch (a) {
    case A_PROF:
        return var_get(VAR_OAK_SCENE) >= 1;
    case A_RIVAL:
        return !flag_get(FLAG_BEAT_RIVAL_IN_OAKS_LAB);
    case A_BALL1: case A_BALL2: case A_BALL3: {
        if (!flag_get(FLAG_SYS_POKEMON_GET))
            return 1;
        int b = a - A_BALL1;
        int mine = 0;
        while (mine < 2 && ball_starter_var[mine] != var_get(VAR_STARTER_MON))
            mine++;
        return b != mine && b != rival_ball_of[mine];
    }
    default:
        return 1;
    }
}

static int actor_at(int x, int y)
{
    for (int a = 0; a < ACTOR_COUNT; a++)
        if (actors[a].x == x && actors[a].y == y && actor_visible(a))
            return a;
    return -1;
}

static const u16 player_obj[4] = {OBJ_PLAYER_D, OBJ_PLAYER_U, OBJ_PLAYER_L, OBJ_PLAYER_R};

static void place_obj(int slot, int cx, int cy, u16 tile, u8 bank)
{
    int sx = cx * 16 - scroll_x, sy = cy * 16 - scroll_y;
    if (sx <= -16 || sx >= 240 || sy <= -16 || sy >= 160) {
        OAM[slot * 4] = 0x0200;
        return;
    }
    OAM[slot * 4] = (u16)(sy & 0xFF);                    /* square, 4bpp */
    OAM[slot * 4 + 1] = (u16)((sx & 0x1FF) | 0x4000);    /* 16x16 */
    OAM[slot * 4 + 2] = (u16)(tile | (1 << 10) | (bank << 12));
}

static void update_camera_and_sprites(void)
{
    s16 sx = (s16)(px * 16 + 8 - 120), sy = (s16)(py * 16 + 8 - 72);
    if (sx < 0) sx = 0;
    if (sx > MAP_W * 16 - 240) sx = MAP_W * 16 - 240;
    if (sy < 0) sy = 0;
    if (sy > MAP_H * 16 - 160) sy = MAP_H * 16 - 160;
    scroll_x = sx;
    scroll_y = sy;
    REG_BG0HOFS = (u16)sx;
    REG_BG0VOFS = (u16)sy;
    place_obj(0, px, py, player_obj[facing], BANK_PLAYER);
    int slot = 1;
    for (int a = 0; a < ACTOR_COUNT; a++)
        if (actor_visible(a))
            place_obj(slot++, actors[a].x, actors[a].y, actors[a].obj, actors[a].bank);
    for (; slot < 12; slot++)
        OAM[slot * 4] = 0x0200;
}

static u8 cell_kind(int x, int y)
{
    if (x < 0 || y < 0 || x >= MAP_W || y >= MAP_H)
        return KIND_SOLID;
    return gfx_meta_kind[MAP_CELLS(cur_map)[y * MAP_W + x]];
}

static void write_position(void)
{
    u8 *b = sb1();
    b[SB1_POS_X] = px; b[SB1_POS_X + 1] = 0;
    b[SB1_POS_Y] = py; b[SB1_POS_Y + 1] = 0;
}

static void on_enter_map(void);

/* a map load: FireRed's InitOverworldBgs -> MoveSaveBlocks_ResetHeap, then the map's
 * OnTransition scripts (setworldmapflag) */
static void load_map(u8 map, u8 x, u8 y, u8 face)
{
    cur_map = map;
    px = x;
    py = y;
    facing = face;
    saveblocks_move();
    u8 *b = sb1();
#if defined(LAYOUT_EMERALD)
    course_on_load(map, b);
#else
    b[SB1_MAP_GROUP] = map_ids[map][0];
    b[SB1_MAP_NUM] = map_ids[map][1];
#endif
    b[SB1_WARP_ID] = 0xFF;
    write_position();
    if (map == MAP_ACORN_TOWN)
        flag_set(FLAG_WORLD_MAP_TOWN);
    if (map == MAP_MAPLE_CITY)
        flag_set(FLAG_WORLD_MAP_CITY);
    for (int cy = 0; cy < MAP_H; cy++)
        for (int cx = 0; cx < MAP_W; cx++)
            draw_cell(cx, cy, MAP_CELLS(map)[cy * MAP_W + cx]);
    REG_DISPCNT = 0x0100 | 0x0200 | 0x1000 | 0x0040;
    update_camera_and_sprites();
}

/* ------------------------------------------------------------------ scripts */

enum { OP_END, OP_MSG, OP_FLAG, OP_VAR, OP_WARP, OP_FN, OP_YESNO, OP_BATTLE };
typedef struct { u8 op, a, b, c; u16 v, w; const void *p; } Cmd;
#define MSG(t) {OP_MSG, 0, 0, 0, 0, 0, t}
#define SETFLAG(f) {OP_FLAG, 0, 0, 0, f, 0, 0}
#define SETVAR(n, x) {OP_VAR, 0, 0, 0, n, x, 0}
#define WARP(m, x, y, f) {OP_WARP, m, x, y, f, 0, 0}
#define FN(f) {OP_FN, 0, 0, 0, 0, 0, (const void *)(f)}
#define YESNO(t) {OP_YESNO, 0, 0, 0, 0, 0, t}
#define BATTLE {OP_BATTLE, 0, 0, 0, 0, 0, 0}
#define END {OP_END, 0, 0, 0, 0, 0, 0}

enum { M_WALK, M_TEXT, M_YESNO, M_MENU, M_BATTLE, M_PICK, M_PARTY };
static u8 mode;
static const Cmd *pc;
static u8 yes_cursor;

static void start_trainer_battle(void);
#if !defined(LAYOUT_EMERALD)
static void start_boss_battle(u8 index);
#endif

static void run_script(void)
{
    while (pc) {
        const Cmd *c = pc++;
        switch (c->op) {
        case OP_END:
            pc = 0;
            mode = M_WALK;
            return;
        case OP_MSG:
            field_message(c->p);
            mode = M_TEXT;
            return;
        case OP_YESNO:
            field_message(c->p);
            yes_cursor = 0;
            ui_put(20, 17, gfx_font[0xEF]);
            draw_text_at(21, 17, (const u8 *)"\xD3\xBF\xCD\x00\x00\xC8\xC9\xFF", 8); /* YES  NO */
            mode = M_YESNO;
            return;
        case OP_FLAG:
            flag_set(c->v);
            break;
        case OP_VAR:
            var_set(c->v, c->w);
            break;
        case OP_WARP:
            field_message_close();
            load_map(c->a, c->b, c->c, (u8)c->v);
            break;
        case OP_FN:
            ((void (*)(void))c->p)();
            break;
        case OP_BATTLE:
            field_message_close();
#if defined(LAYOUT_EMERALD)
            course_trainer = c->a;
            start_trainer_battle();
#else
            if (c->a)
                start_boss_battle((u8)(c->a - 1));
            else
                start_trainer_battle();
#endif
            return;
        }
    }
    mode = M_WALK;
}

static void start_script(const Cmd *script)
{
    pc = script;
    run_script();
}

/* ChoseStarter: FLAG_SYS_POKEMON_GET, givemon; the rival takes his (lab scene 3) */
static void give_starter(void)
{
    var_set(VAR_STARTER_MON, ball_starter_var[picked_ball]);
    flag_set(FLAG_SYS_POKEMON_GET);
    party_add(ball_species[picked_ball], 5);
    dex_set(ball_species[picked_ball], 1);
    update_camera_and_sprites();
}

static void heal_and_refresh(void)
{
    party_heal();
    update_camera_and_sprites();
}

static void parcel_give(void) { bag_add(SB1_POCKET_KEY, POCKET_KEY_COUNT, ITEM_PARCEL, 1); }
static void parcel_take(void) { bag_remove(SB1_POCKET_KEY, POCKET_KEY_COUNT, ITEM_PARCEL, 1); }
static void balls_give(void) { bag_add(SB1_POCKET_BALLS, POCKET_BALLS_COUNT, ITEM_POKE_BALL, 5); }

#if !defined(LAYOUT_EMERALD)
/* preparation (issue 32): MOM heals the party like FireRed's PlayersHouse_1F mom (a heal spot), counting
 * the heals that restored HP in our own var; the shop clerk sells BALLS for money after the DEX */
static void mom_heal(void)
{
    int hurt = 0;
    for (u8 i = 0; i < party_count(); i++)
        hurt |= party_hp(i) < party_max_hp(i);
    party_heal();
    if (hurt)
        var_set(VAR_RESTS, (u16)(var_get(VAR_RESTS) + 1));
}

static const Cmd s_mom_heal[] = {
    FN(mom_heal),
    MSG("MOM: You look tired. Rest a\nbit! ... Your critters are\nfull of energy again!"),
    END,
};

static char shop_line[72];
static Cmd shop_script[4];
static const Cmd s_bought[] = {MSG("CLERK: Here you are! Thank\nyou!"), END};
static const Cmd s_no_money[] = {MSG("CLERK: You don't have enough\nmoney."), END};

static void shop_buy(void)
{
    u32 money = money_get();
    if (money < BALL_PRICE) {
        pc = s_no_money;
        return;
    }
    money_set(money - BALL_PRICE); /* src/shop.c Task_ReturnToItemListAfterItemPurchase: RemoveMoney, AddBagItem */
    bag_add(SB1_POCKET_BALLS, POCKET_BALLS_COUNT, ITEM_POKE_BALL, 1);
    var_set(VAR_PURCHASES, (u16)(var_get(VAR_PURCHASES) + 1));
    pc = s_bought;
}

static void shop_open(void)
{
    static const char head[] = "CLERK: A BALL is 200.\nMoney ";
    int n = 0;
    for (const char *q = head; *q; q++) shop_line[n++] = *q;
    char digits[10];
    int d = 0;
    u32 money = money_get();
    do { digits[d++] = (char)('0' + money % 10); money /= 10; } while (money && d < 10);
    while (d) shop_line[n++] = digits[--d];
    for (const char *q = ". Buy?"; *q; q++) shop_line[n++] = *q;
    shop_line[n] = 0;
    shop_script[0] = (Cmd)YESNO(shop_line);
    shop_script[1] = (Cmd)FN(shop_buy);
    shop_script[2] = (Cmd)END;
    shop_script[3] = (Cmd)END;
}

static u8 rival_species(void)
{
    int mine = 0;
    while (mine < 2 && ball_starter_var[mine] != var_get(VAR_STARTER_MON))
        mine++;
    return (u8)ball_species[rival_ball_of[mine]];
}
#endif

/* PalletTown OakTrigger: the professor stops the player at the tall grass and leads him to the
 * lab; its last steps set the lab scene 1, VAR_MAP_SCENE_PALLET_TOWN_OAK 1 and warp into the lab */
#if !defined(LAYOUT_EMERALD)
static const Cmd s_oak_stop[] = {
    MSG("PROF. HAZEL: Hey! Wait!\nDon't go out there!"),
    MSG("PROF. HAZEL: Wild critters\nhide in the tall grass.\nCome with me to my lab!"),
    SETVAR(VAR_LAB_SCENE, 1),
    SETVAR(VAR_OAK_SCENE, 1),
    WARP(MAP_LAB, 11, 7, FACE_UP),
    MSG("KIT: Gramps! I'm sick of\nwaiting!"),
    MSG("PROF. HAZEL: Three critters\nare on that table.\nPick one to keep!"),
    SETVAR(VAR_LAB_SCENE, 2),
    END,
};
#endif

static const Cmd s_ball_pick[] = {
    YESNO("It's \3!\nTake \3?"),
    FN(give_starter),
    MSG("You received \1!"),
    MSG("KIT: Then I'll take\n\2!"),
    SETVAR(VAR_LAB_SCENE, 3),
    MSG("KIT: Wait! Let's see whose\ncritter is stronger!"),
    BATTLE,
    /* EndRivalBattle: heal, the rival leaves, lab scene 4, FLAG_BEAT_RIVAL_IN_OAKS_LAB */
    FN(heal_and_refresh),
    MSG("KIT: Smell you later!"),
    SETVAR(VAR_LAB_SCENE, 4),
    SETFLAG(FLAG_BEAT_RIVAL_IN_OAKS_LAB),
    FN(update_camera_and_sprites),
    MSG("PROF. HAZEL: Your critter is\nrested. MAPLE CITY is up\nNORTH PATH."),
    END,
};

/* ViridianCity_Mart ParcelScene: mart scene 1, giveitem ITEM_OAKS_PARCEL, lab scene 5 */
static const Cmd s_parcel_scene[] = {
    MSG("CLERK: Hi! You're from\nACORN TOWN? Please take\nthis parcel to PROF. HAZEL!"),
    SETVAR(VAR_MART_SCENE, 1),
    FN(parcel_give),
    MSG("You received the PARCEL!"),
    SETVAR(VAR_LAB_SCENE, 5),
    END,
};

/* ProfessorOaksLab ReceiveDexScene: removeitem ITEM_OAKS_PARCEL ... FLAG_SYS_POKEDEX_GET, five
 * POKE BALLS, lab scene 6, mart scene 2 */
static const Cmd s_dex_scene[] = {
    MSG("PROF. HAZEL: Oh! Is that my\nparcel from the MAPLE CITY\nshop?"),
    FN(parcel_take),
    MSG("You handed over the PARCEL."),
    MSG("PROF. HAZEL: Thank you! As a\nreward, take this CRITTER\nDEX!"),
    SETFLAG(FLAG_SYS_POKEDEX_GET),
    MSG("You received the DEX!"),
    FN(balls_give),
    MSG("You received 5 BALLS!"),
    SETVAR(VAR_LAB_SCENE, 6),
    SETVAR(VAR_MART_SCENE, 2),
    MSG("PROF. HAZEL: Catch critters\nin the tall grass and fill\nthe DEX!"),
    END,
};

static const Cmd s_one[][2] = {
    {MSG("MOM: Good morning! Off for a\nwalk? Take care out there!"), END},
    {MSG("PROF. HAZEL: Go on! Pick a\ncritter from the table."), END},
    {MSG("PROF. HAZEL: MAPLE CITY is\nup NORTH PATH. Go and\nexplore!"), END},
    {MSG("PROF. HAZEL: Fill the DEX\nwith every critter you meet!"), END},
    {MSG("KIT: Yo! Gramps is out. I'm\nwaiting for a critter too!"), END},
    {MSG("A critter ball. Better not\ntouch it yet."), END},
    {MSG("That's PROF. HAZEL's last\ncritter."), END},
    {MSG("NORTH PATH leads to MAPLE\nCITY. It has a shop!"), END},
    {MSG("The shop is the big house\nby the south gate."), END},
    {MSG("CLERK: Say hi to\nPROF. HAZEL!"), END},
    {MSG("KIT: Pick one! Then I'll\npick mine."), END},
};
enum { T_MOM, T_PROF_PICK, T_PROF_GO, T_PROF_DONE, T_RIVAL_WAIT, T_BALL_NO, T_BALL_LAST, T_GIRL, T_MAN,
       T_CLERK, T_RIVAL_PICK };

#if defined(LAYOUT_EMERALD)
static void start_battle(u8 trainer, u16 species, u8 level);
#include "course_emerald.inc"
#endif

#if !defined(LAYOUT_EMERALD)
/* after the DEX the professor runs the BOSS HALL: UP/DOWN picks one of the bosses (battle_data.inc),
 * A shows its challenge (the moment before its battle), B leaves */
static u8 boss_pick;
static char boss_line[64];
static Cmd boss_script[4];
static const char *boss_name(u8 i);
static const char *boss_text(u8 i);
static u8 boss_count(void);

static void boss_pick_draw(void)
{
    field_message("PROF. HAZEL: Pick a boss\nwith UP and DOWN, then A.");
    u8 buf[24];
    char label[20] = "> ";
    int n = 2;
    for (const char *q = boss_name(boss_pick); *q && n < 18; q++)
        label[n++] = *q;
    label[n] = 0;
    encode(buf, sizeof buf, label);
    draw_text_at(1, 17, buf, 28);
}

static void boss_pick_open(void)
{
    mode = M_PICK;
    boss_pick_draw();
}

static void boss_pick_input(u16 pressed)
{
    if (pressed & KEY_B) {
        field_message_close();
        mode = M_WALK;
        return;
    }
    if (pressed & KEY_UP) {
        if (boss_pick) boss_pick--;
    } else if (pressed & KEY_DOWN) {
        if (boss_pick + 1 < boss_count()) boss_pick++;
    } else if (pressed & KEY_A) {
        field_message_close();
        boss_line[0] = 0;
        int n = 0;
        for (const char *q = boss_name(boss_pick); *q; q++) boss_line[n++] = *q;
        boss_line[n++] = ':';
        boss_line[n++] = '\n';
        for (const char *q = boss_text(boss_pick); *q && n < 62; q++) boss_line[n++] = *q;
        boss_line[n] = 0;
        boss_script[0] = (Cmd)MSG(boss_line);
        boss_script[1] = (Cmd){OP_BATTLE, (u8)(boss_pick + 1), 0, 0, 0, 0, 0};
        boss_script[2] = (Cmd)MSG("PROF. HAZEL: Well fought!");
        boss_script[3] = (Cmd)END;
        start_script(boss_script);
        return;
    } else {
        return;
    }
    boss_pick_draw();
}
#endif

static void talk_actor(int a)
{
    switch (a) {
#if defined(LAYOUT_EMERALD)
    case A_MOM: start_script(s_one[T_MOM]); break;
#else
    case A_MOM: start_script(party_count() ? s_mom_heal : s_one[T_MOM]); break;
#endif
    case A_PROF:
        if (var_get(VAR_LAB_SCENE) == 5 && bag_count(SB1_POCKET_KEY, POCKET_KEY_COUNT, ITEM_PARCEL))
            start_script(s_dex_scene);
        else if (flag_get(FLAG_SYS_POKEDEX_GET))
#if defined(LAYOUT_EMERALD)
            start_script(s_one[T_PROF_DONE]);
#else
            boss_pick_open();
#endif
        else if (flag_get(FLAG_SYS_POKEMON_GET))
            start_script(s_one[T_PROF_GO]);
        else
            start_script(s_one[T_PROF_PICK]);
        break;
    case A_RIVAL:
        start_script(s_one[var_get(VAR_LAB_SCENE) >= 2 ? T_RIVAL_PICK : T_RIVAL_WAIT]);
        break;
    case A_BALL1: case A_BALL2: case A_BALL3:
        picked_ball = (u8)(a - A_BALL1);
        if (flag_get(FLAG_SYS_POKEMON_GET))
            start_script(s_one[T_BALL_LAST]);
        else if (var_get(VAR_LAB_SCENE) < 2)
            start_script(s_one[T_BALL_NO]);
        else
            start_script(s_ball_pick);
        break;
    case A_GIRL: start_script(s_one[T_GIRL]); break;
    case A_MAN: start_script(s_one[T_MAN]); break;
#if defined(LAYOUT_EMERALD)
    case A_CLERK: start_script(s_one[T_CLERK]); break;
#else
    case A_CLERK:
        if (flag_get(FLAG_SYS_POKEDEX_GET)) {
            shop_open();
            start_script(shop_script);
        } else {
            start_script(s_one[T_CLERK]);
        }
        break;
#endif
#if defined(LAYOUT_EMERALD)
    case A_GUIDE: course_talk(); break;
#endif
    }
}

static Cmd sign_script[2];

static void interact(void)
{
    static const s8 dx[4] = {0, 0, -1, 1}, dy[4] = {1, -1, 0, 0};
    int x = px + dx[facing], y = py + dy[facing];
    int a = actor_at(x, y);
    if (a < 0 && cell_kind(x, y) == KIND_REACH)
        a = actor_at(x + dx[facing], y + dy[facing]);
    if (a >= 0) {
        talk_actor(a);
        return;
    }
    for (unsigned i = 0; i < sizeof signs / sizeof signs[0]; i++)
        if (signs[i].map == cur_map && signs[i].x == x && signs[i].y == y) {
            sign_script[0] = (Cmd)MSG(signs[i].text);
            sign_script[1] = (Cmd)END;
            start_script(sign_script);
            return;
        }
}

static void on_enter_map(void)
{
    if (cur_map == MAP_SHOP && var_get(VAR_MART_SCENE) == 0)
        start_script(s_parcel_scene);
}

/* ------------------------------------------------------------------ battle */

/* the battle screen's number and HP bar: both builds' battles draw them alike */
static void draw_number(int x, int y, int v)
{
    for (int i = 2; i >= 0; i--) { /* right-aligned in three columns */
        ui_put(x + i, y, (v || i == 2) ? gfx_font[fr_code((char)('0' + v % 10))] : TILE_PAPER);
        v /= 10;
    }
}

static void draw_hp_bar(int x, int y, s16 hp, s16 max_hp)
{
    int fill = max_hp > 0 ? (hp * 48) / max_hp : 0;
    if (hp > 0 && fill == 0)
        fill = 1;
    ui_put(x, y, TILE_HP_L);
    for (int i = 0; i < 6; i++) {
        int f = fill - i * 8;
        f = f < 0 ? 0 : (f > 8 ? 8 : f);
        static const u16 hp_tiles[9] = {TILE_HP_0, TILE_HP_1, TILE_HP_2, TILE_HP_3, TILE_HP_4,
                                        TILE_HP_5, TILE_HP_6, TILE_HP_7, TILE_HP_8};
        ui_put(x + 1 + i, y, hp_tiles[f]);
    }
    ui_put(x + 7, y, TILE_HP_R);
}

#if defined(LAYOUT_EMERALD)
typedef struct { u16 species; u8 level; s16 hp, max_hp; } Foe;
static Foe foe;
static u8 battle_trainer, battle_cursor;
static const char *bqueue[6];
static u8 bq_len, bq_pos;
enum { THEN_MENU, THEN_END };
static u8 bq_then;
static u8 btext[160];

static void draw_picture(int x0, int y0, u16 species)
{
    u16 first = PIC_SPROUTLE;
    u8 bank = BANK_SPROUTLE;
    switch (species) {
    case SPECIES_FIRE: first = PIC_EMBERPUP; bank = BANK_EMBERPUP; break;
    case SPECIES_WATER: first = PIC_DRIPLET; bank = BANK_DRIPLET; break;
    case SPECIES_WILD1: first = PIC_EMBERPUP; bank = BANK_PIPWING; break;
    case SPECIES_WILD2: first = PIC_DRIPLET; bank = BANK_NIBBLET; break;
    }
    for (int ty = 0; ty < 8; ty++)
        for (int tx = 0; tx < 8; tx++)
            ui_put(x0 + tx, y0 + ty, (u16)((first + ty * 8 + tx) | (bank << 12)));
}

static void draw_name(int x, int y, const char *s)
{
    u8 buf[24];
    encode(buf, sizeof buf, s);
    draw_text_at(x, y, buf, 14);
}

static void battle_draw_status(void)
{
    draw_name(1, 1, species_name(foe.species));
    ui_put(10, 1, gfx_font[0xC6]); /* L */
    draw_number(11, 1, foe.level);
    draw_hp_bar(1, 2, foe.hp, foe.max_hp);
    draw_name(15, 9, species_name(party_species(0)));
    ui_put(24, 9, gfx_font[0xC6]);
    draw_number(25, 9, party_level(0));
    draw_hp_bar(15, 10, party_hp(0), party_max_hp(0));
    draw_number(18, 11, party_hp(0));
    ui_put(21, 11, gfx_font[0xBA]);
    draw_number(22, 11, party_max_hp(0));
}

static void battle_show_head(void)
{
    encode(btext, sizeof btext, bqueue[bq_pos]);
    /* battle text is printed from gDisplayedStringBattle; the field message box stays hidden */
    memcpy((void *)ADDR_DISPLAYED_BATTLE, btext, sizeof btext);
    box_show(btext);
    battle_draw_status();
}

static void battle_queue(const char *s) { if (bq_len < 6) bqueue[bq_len++] = s; }

static void battle_flush(u8 then)
{
    bq_then = then;
    bq_pos = 0;
    battle_show_head();
}

static void battle_menu(void)
{
    bq_len = 0;
    encode(btext, sizeof btext, "What will \1 do?");
    box_show(btext);
    static const u8 opts[] = {0xC0, 0xC3, 0xC1, 0xC2, 0xCE, 0x00, 0x00, 0xBC, 0xBB, 0xC6, 0xC6, 0x00, 0x00,
                              0xCC, 0xCF, 0xC8, 0xFF}; /* FIGHT  BALL  RUN */
    draw_text_at(3, 17, opts, 26);
    static const u8 cols[3] = {2, 9, 15};
    ui_put(cols[battle_cursor], 17, gfx_font[0xEF]);
    battle_draw_status();
}

static void start_battle(u8 trainer, u16 species, u8 level)
{
    battle_trainer = trainer;
    foe.species = species;
    foe.level = level;
    foe.max_hp = foe.hp = (s16)(10 + 2 * level);
    battle_cursor = 0;
    bq_len = 0;
    *(volatile u32 *)ADDR_BATTLE_TYPE = trainer ? BATTLE_TYPE_TRAINER : 0;
    *(volatile u8 *)ADDR_BATTLE_OUTCOME = 0;
    saveblocks_move(); /* CB2_InitBattle -> MoveSaveBlocks_ResetHeap */
    *(volatile u8 *)(ADDR_MAIN + MAIN_BITS_OFFSET) |= MAIN_INBATTLE_BIT;
    if (!trainer)
        dex_set(species, 0);
    REG_DISPCNT = 0x0200; /* BG1 only */
    for (int y = 0; y < 20; y++)
        for (int x = 0; x < 30; x++)
            ui_put(x, y, TILE_PAPER);
    draw_picture(20, 0, foe.species);
    draw_picture(3, 6, party_species(0));
    mode = M_BATTLE;
    if (trainer) {
#if defined(LAYOUT_EMERALD)
        battle_queue("\5\nwants to battle!");
        battle_queue("\5\nsent out \2!");
#else
        battle_queue("KIT wants to battle!");
        battle_queue("KIT sent out \2!");
#endif
    } else {
        battle_queue("A wild \4 appeared!");
    }
    battle_queue("Go! \1!");
    battle_flush(THEN_MENU);
}

#if !defined(LAYOUT_EMERALD)
static void start_trainer_battle(void) { start_battle(1, rival_species(), 5); }
#endif

static void battle_end(void)
{
    *(volatile u8 *)(ADDR_MAIN + MAIN_BITS_OFFSET) &= (u8)~MAIN_INBATTLE_BIT;
    *(volatile u32 *)ADDR_BATTLE_TYPE = 0;
    ui_clear(0, 32);
    u8 outcome = *(volatile u8 *)ADDR_BATTLE_OUTCOME;
    if (!battle_trainer && outcome == B_OUTCOME_LOST) {
        /* whited out: home, healed */
        party_heal();
        load_map(MAP_HOUSE_1F, 10, 9, FACE_UP);
        mode = M_WALK;
        return;
    }
    load_map(cur_map, px, py, facing); /* back to the field: the blocks move again */
    mode = M_WALK;
#if defined(LAYOUT_EMERALD)
    if (pc) /* a scripted battle (the course's wild one too) goes on with its script */
        run_script();
#else
    if (battle_trainer)
        run_script();
#endif
}

static void battle_fight(void)
{
#if defined(LAYOUT_EMERALD)
    s16 my_hit = 99, foe_hit = 2; /* the course's battles take one FIGHT each */
#else
    s16 my_hit = (s16)(battle_trainer ? 7 : 6), foe_hit = (s16)(battle_trainer ? 3 : 2);
#endif
    foe.hp = (s16)(foe.hp > my_hit ? foe.hp - my_hit : 0);
    battle_queue("\1 used TACKLE!");
    if (foe.hp == 0) {
        battle_queue(battle_trainer ? "Foe \2 fainted!" : "Wild \4 fainted!");
        if (battle_trainer)
#if defined(LAYOUT_EMERALD)
            battle_queue("You defeated \5!");
#else
            battle_queue("You defeated KIT!");
#endif
        *(volatile u8 *)ADDR_BATTLE_OUTCOME = B_OUTCOME_WON;
        battle_flush(THEN_END);
        return;
    }
    s16 hp = party_hp(0);
    party_set_hp(0, (s16)(hp > foe_hit ? hp - foe_hit : 0));
    battle_queue(battle_trainer ? "Foe \2 used TACKLE!" : "Wild \4 used TACKLE!");
    if (party_hp(0) == 0) {
        battle_queue("\1 fainted!");
        *(volatile u8 *)ADDR_BATTLE_OUTCOME = B_OUTCOME_LOST;
        battle_flush(THEN_END);
        return;
    }
    battle_flush(THEN_MENU);
}

static void battle_ball(void)
{
    if (battle_trainer) {
        battle_queue("The trainer blocked the\nBALL!");
        battle_flush(THEN_MENU);
        return;
    }
    if (bag_count(SB1_POCKET_BALLS, POCKET_BALLS_COUNT, ITEM_POKE_BALL) == 0) {
        battle_queue("You have no BALLS!");
        battle_flush(THEN_MENU);
        return;
    }
    bag_remove(SB1_POCKET_BALLS, POCKET_BALLS_COUNT, ITEM_POKE_BALL, 1);
    battle_queue("You threw a BALL!");
    battle_queue("Gotcha! \4 was caught!");
    dex_set(foe.species, 1);
    if (party_add(foe.species, foe.level) < 0)
        battle_queue("\4 was sent to the PC.");
    *(volatile u8 *)ADDR_BATTLE_OUTCOME = B_OUTCOME_CAUGHT;
    battle_flush(THEN_END);
}

static void battle_run(void)
{
    if (battle_trainer) {
        battle_queue("No! There's no running\nfrom a trainer battle!");
        battle_flush(THEN_MENU);
        return;
    }
    battle_queue("Got away safely!");
    *(volatile u8 *)ADDR_BATTLE_OUTCOME = B_OUTCOME_RAN;
    battle_flush(THEN_END);
}

static void battle_input(u16 pressed)
{
    if (bq_len) { /* a message is up: A or B goes on */
        if (!(pressed & (KEY_A | KEY_B)))
            return;
        if (++bq_pos < bq_len) {
            battle_show_head();
            return;
        }
        bq_len = 0;
        if (bq_then == THEN_END)
            battle_end();
        else
            battle_menu();
        return;
    }
    if (pressed & (KEY_LEFT | KEY_UP)) {
        if (battle_cursor > 0) battle_cursor--;
        battle_menu();
    } else if (pressed & (KEY_RIGHT | KEY_DOWN)) {
        if (battle_cursor < 2) battle_cursor++;
        battle_menu();
    } else if (pressed & KEY_A) {
        if (battle_cursor == 0) battle_fight();
        else if (battle_cursor == 1) battle_ball();
        else battle_run();
    }
}

#else
#include "battle_fr.inc"
static const char *boss_name(u8 i) { return trainers[i].name; }
static const char *boss_text(u8 i) { return trainers[i].text; }
static u8 boss_count(void) { return (u8)TRAINER_COUNT; }
#endif

/* ------------------------------------------------------------------ options menu (START) */

static u8 menu_row;
#if defined(LAYOUT_EMERALD)
#define MENU_INFO_Y 17 /* the BALLS count and the PARCEL */
#else
#define MENU_INFO_Y 18 /* below the PARTY row */
static void field_party_open(void);
/* TEXT SPEED, BATTLE STYLE, and PARTY once there is a critter (FireRed's START menu shows POKEMON
 * only after FLAG_SYS_POKEMON_GET: src/start_menu.c SetUpStartMenu_NormalField) */
static u8 menu_rows(void) { return party_count() ? 3 : 2; }
#endif

static void menu_draw(void)
{
    static const char *speeds[3] = {"SLOW", "MID", "FAST"};
    u16 opt = (u16)(sb2()[SB2_OPTIONS] | (sb2()[SB2_OPTIONS + 1] << 8));
    u8 speed = (u8)(opt & OPT_TEXT_MASK);
    u8 buf[40];
    draw_box();
    encode(buf, sizeof buf, "TEXT SPEED");
    draw_text_at(2, 15, buf, 12);
    encode(buf, sizeof buf, speeds[speed < 3 ? speed : 1]);
    draw_text_at(16, 15, buf, 8);
    encode(buf, sizeof buf, "BATTLE STYLE");
    draw_text_at(2, 16, buf, 13);
    encode(buf, sizeof buf, (opt & OPT_STYLE_BIT) ? "SET" : "SHIFT");
    draw_text_at(16, 16, buf, 8);
    char line[24] = "BALLS: ";
    u16 balls = bag_count(SB1_POCKET_BALLS, POCKET_BALLS_COUNT, ITEM_POKE_BALL);
    line[7] = (char)('0' + (balls / 10) % 10);
    line[8] = (char)('0' + balls % 10);
    line[9] = 0;
    encode(buf, sizeof buf, line);
    draw_text_at(2, MENU_INFO_Y, buf, 12);
    if (bag_count(SB1_POCKET_KEY, POCKET_KEY_COUNT, ITEM_PARCEL)) {
        encode(buf, sizeof buf, "PARCEL");
        draw_text_at(16, MENU_INFO_Y, buf, 8);
    }
#if !defined(LAYOUT_EMERALD)
    if (menu_rows() > 2) {
        encode(buf, sizeof buf, "PARTY");
        draw_text_at(2, 17, buf, 8);
    }
#endif
    ui_put(1, (u8)(15 + menu_row), gfx_font[0xEF]);
}

static void menu_input(u16 pressed)
{
#if !defined(LAYOUT_EMERALD)
    if ((pressed & KEY_A) && menu_row == 2) {
        field_party_open();
        return;
    }
#endif
    if (pressed & (KEY_B | KEY_START | KEY_A)) {
        box_hide();
        mode = M_WALK;
        return;
    }
#if defined(LAYOUT_EMERALD)
    if (pressed & (KEY_UP | KEY_DOWN))
        menu_row ^= 1;
#else
    if (pressed & KEY_DOWN)
        menu_row = (u8)((menu_row + 1) % menu_rows());
    else if (pressed & KEY_UP)
        menu_row = (u8)((menu_row + menu_rows() - 1) % menu_rows());
#endif
#if !defined(LAYOUT_EMERALD)
    if (menu_row == 2) { /* PARTY: nothing to change with LEFT/RIGHT */
        menu_draw();
        return;
    }
#endif
    if (pressed & (KEY_LEFT | KEY_RIGHT)) {
        u8 *o = sb2() + SB2_OPTIONS;
        u16 opt = (u16)(o[0] | (o[1] << 8));
        if (menu_row == 0) {
            int s = (int)(opt & OPT_TEXT_MASK) + ((pressed & KEY_RIGHT) ? 1 : -1);
            s = s < 0 ? 0 : (s > 2 ? 2 : s);
            opt = (u16)((opt & ~OPT_TEXT_MASK) | (u16)s);
        } else {
            opt ^= OPT_STYLE_BIT;
        }
        o[0] = (u8)opt;
        o[1] = (u8)(opt >> 8);
    }
    menu_draw();
}

#if !defined(LAYOUT_EMERALD)
/* ------------------------------------------------------------------ party menu (START, PARTY) */

/* The party list outside battle (issue 32 item 4), FireRed's in spirit (src/party_menu.c): pick a critter,
 * SWITCH, pick another, and the two gPlayerParty records trade places (SwitchPartyMon swaps the whole
 * struct Pokemon); the same critter twice, B or CANCEL changes nothing. The lead's species after every
 * switch lands in our own var (VAR_SWITCHED_LEAD), which a task's goal reads: the records themselves are
 * the gameplay track's party view. B from the list goes back to the START menu. */
enum { FP_LIST, FP_SUB, FP_MOVE };
static u8 fp_state, fp_cursor, fp_first, fp_sub;

static void field_party_draw(void)
{
    for (int y = 0; y < 20; y++)
        for (int x = 0; x < 30; x++)
            ui_put(x, y, TILE_PAPER);
    for (u8 i = 0; i < party_count() && i < PARTY_SIZE; i++) {
        int y = 1 + 2 * i;
        box_words(2, y, species_name(party_species(i)), 10);
        ui_put(13, y, gfx_font[0xC6]); /* L */
        draw_number(14, y, party_level(i));
        draw_number(19, y, party_hp(i));
        ui_put(22, y, gfx_font[0xBA]); /* / */
        draw_number(23, y, party_max_hp(i));
        if (fp_state == FP_MOVE && i == fp_first)
            ui_put(27, y, gfx_font[0xEF]); /* the critter being moved */
        ui_put(1, y, i == fp_cursor ? gfx_font[0xEF] : TILE_PAPER);
    }
    draw_box();
    if (fp_state == FP_SUB) {
        box_words(2, 15, "SWITCH", 10);
        box_words(2, 16, "CANCEL", 8);
        ui_put(1, (u8)(15 + fp_sub), gfx_font[0xEF]);
    } else {
        box_words(1, 15, fp_state == FP_MOVE ? "Move to where?" : "Choose a critter.", 28);
    }
}

static void field_party_open(void)
{
    mode = M_PARTY;
    fp_state = FP_LIST;
    fp_cursor = 0;
    field_party_draw();
}

static void field_party_switch(u8 a, u8 b)
{
    if (a == b)
        return;
    u8 tmp[MON_SIZE];
    memcpy(tmp, party_record(a), MON_SIZE);
    memcpy(party_record(a), party_record(b), MON_SIZE);
    memcpy(party_record(b), tmp, MON_SIZE);
    var_set(VAR_SWITCHED_LEAD, party_species(0));
}

static void field_party_input(u16 pressed)
{
    u8 n = party_count();
    if (fp_state == FP_SUB) {
        if (pressed & (KEY_UP | KEY_DOWN))
            fp_sub ^= 1;
        else if ((pressed & KEY_B) || ((pressed & KEY_A) && fp_sub == 1))
            fp_state = FP_LIST;
        else if (pressed & KEY_A) {
            fp_state = FP_MOVE;
            fp_first = fp_cursor;
        } else
            return;
    } else if (pressed & KEY_UP) {
        if (fp_cursor) fp_cursor--;
    } else if (pressed & KEY_DOWN) {
        if (fp_cursor + 1 < n) fp_cursor++;
    } else if (pressed & KEY_A) {
        if (fp_state == FP_MOVE) {
            field_party_switch(fp_first, fp_cursor);
            fp_state = FP_LIST;
        } else {
            fp_state = FP_SUB;
            fp_sub = 0;
        }
    } else if (pressed & KEY_B) {
        if (fp_state == FP_MOVE) {
            fp_state = FP_LIST;
        } else { /* back to the START menu, on PARTY */
            ui_clear(0, 20);
            mode = M_MENU;
            menu_draw();
            return;
        }
    } else
        return;
    field_party_draw();
}
#endif

/* ------------------------------------------------------------------ walking */

static void step(u8 dir)
{
    static const s8 dx[4] = {0, 0, -1, 1}, dy[4] = {1, -1, 0, 0};
    facing = dir;
    int x = px + dx[dir], y = py + dy[dir];
    u8 kind = cell_kind(x, y);
    if ((kind == KIND_WALK || kind == KIND_TALL) && actor_at(x, y) < 0) {
        px = (u8)x;
        py = (u8)y;
        write_position();
    }
    update_camera_and_sprites();
    if (px != x || py != y)
        return;
    for (unsigned i = 0; i < sizeof warps / sizeof warps[0]; i++)
        if (warps[i].map == cur_map && warps[i].x == px && warps[i].y == py) {
#if defined(LAYOUT_EMERALD)
            if (warps[i].to_map == MAP_COURSE)
                course_enter();
#endif
            load_map(warps[i].to_map, warps[i].to_x, warps[i].to_y, warps[i].face);
            on_enter_map();
            return;
        }
#if !defined(LAYOUT_EMERALD)
    if (cur_map == MAP_ACORN_TOWN && py == 1 && var_get(VAR_OAK_SCENE) == 0) {
        start_script(s_oak_stop);
        return;
    }
#endif
    /* wild encounters: NORTH PATH's tall grass, once the player has a creature */
    if (cur_map == WILD_MAP && kind == KIND_TALL && party_count() && party_hp(0) > 0 && (rand16() & 3) == 0) {
        wild_species = (rand16() & 1) ? SPECIES_WILD1 : SPECIES_WILD2;
        start_battle(0, wild_species, (u8)(2 + (rand16() & 1)));
    }
}

static void walk_input(u16 pressed)
{
    if (pressed & KEY_DOWN) step(FACE_DOWN);
    else if (pressed & KEY_UP) step(FACE_UP);
    else if (pressed & KEY_LEFT) step(FACE_LEFT);
    else if (pressed & KEY_RIGHT) step(FACE_RIGHT);
    else if (pressed & KEY_A) interact();
    else if (pressed & KEY_START) {
        menu_row = 0;
        mode = M_MENU;
        menu_draw();
    }
}

static void text_input(u16 pressed)
{
    if (!(pressed & (KEY_A | KEY_B)))
        return;
    field_message_close();
    run_script();
}

static void yesno_input(u16 pressed)
{
    if (pressed & (KEY_UP | KEY_DOWN | KEY_LEFT | KEY_RIGHT)) {
        yes_cursor ^= 1;
        ui_put(20, 17, yes_cursor ? TILE_PAPER : gfx_font[0xEF]);
        ui_put(25, 17, yes_cursor ? gfx_font[0xEF] : TILE_PAPER);
        return;
    }
    if (pressed & (KEY_A | KEY_B)) {
        field_message_close();
        if ((pressed & KEY_B) || yes_cursor) {
            pc = 0;
            mode = M_WALK;
            return;
        }
        run_script();
    }
}

/* ------------------------------------------------------------------ main */

static inline void vblank_wait(void) { __asm__ volatile("swi 0x05" ::: "r0", "r1", "r2", "r3", "memory"); }

int main(void)
{
    REG_IME = 0;
    REG_DISPSTAT = 0x0008; /* VBlank IRQ */
    REG_IE = 0x0001;
    REG_IME = 1;
    ram_power_on();
    video_init();
    load_map(MAP_HOUSE_2F, 10, 7, FACE_DOWN);
    mode = M_WALK;
    u16 held = 0;
    for (;;) {
        vblank_wait();
        u16 now = (u16)(~REG_KEYINPUT & 0x03FF);
        u16 pressed = (u16)(now & ~held);
        held = now;
        if (!pressed)
            continue;
        switch (mode) {
        case M_WALK: walk_input(pressed); break;
        case M_TEXT: text_input(pressed); break;
        case M_YESNO: yesno_input(pressed); break;
        case M_MENU: menu_input(pressed); break;
        case M_BATTLE: battle_input(pressed); break;
#if !defined(LAYOUT_EMERALD)
        case M_PICK: boss_pick_input(pressed); break;
        case M_PARTY: field_party_input(pressed); break;
#endif
        }
    }
}
