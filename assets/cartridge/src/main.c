/* Parcel Quest - an original Game Boy game for the oakwatch test harness.
 *
 * Everything on screen lives in the background map. The game keeps a 20x18 shadow copy of
 * the visible screen in WRAM; game logic writes the shadow and marks rows dirty, and the main
 * loop copies dirty rows to VRAM during VBlank (flush_rows in crt0.s). Input is polled once per
 * frame and only new presses act, so each press does exactly one thing.
 */
#include <stdint.h>
#include <string.h>
#include "game.h"

uint8_t shadow[MAP_W * MAP_H];
uint8_t dirty[MAP_H];
volatile uint8_t vblank_flag;
static uint8_t keys_prev;

static const uint16_t row_off[MAP_H] = {
    0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220, 240, 260, 280, 300, 320, 340};

/* ------------------------------------------------------------------ world data */

typedef struct { uint8_t map, x, y, dmap, dx, dy, dface; } Warp;
static const Warp warps[] = {
    {MAP_HOUSE_2F, 16, 4, MAP_HOUSE_1F, 15, 4, FACE_LEFT},
    {MAP_HOUSE_1F, 16, 4, MAP_HOUSE_2F, 15, 4, FACE_LEFT},
    {MAP_HOUSE_1F, 14, 13, MAP_ACORN_TOWN, 3, 6, FACE_DOWN},
    {MAP_HOUSE_1F, 15, 13, MAP_ACORN_TOWN, 3, 6, FACE_DOWN},
    {MAP_ACORN_TOWN, 3, 5, MAP_HOUSE_1F, 14, 12, FACE_UP},
    {MAP_ACORN_TOWN, 16, 11, MAP_LAB, 9, 12, FACE_UP},
    {MAP_LAB, 9, 13, MAP_ACORN_TOWN, 16, 12, FACE_DOWN},
    {MAP_LAB, 10, 13, MAP_ACORN_TOWN, 16, 12, FACE_DOWN},
    {MAP_ACORN_TOWN, 9, 0, MAP_NORTH_PATH, 9, 16, FACE_UP},
    {MAP_ACORN_TOWN, 10, 0, MAP_NORTH_PATH, 10, 16, FACE_UP},
    {MAP_NORTH_PATH, 9, 17, MAP_ACORN_TOWN, 9, 2, FACE_DOWN},
    {MAP_NORTH_PATH, 10, 17, MAP_ACORN_TOWN, 10, 2, FACE_DOWN},
    {MAP_NORTH_PATH, 14, 0, MAP_MAPLE_CITY, 14, 16, FACE_UP},
    {MAP_NORTH_PATH, 15, 0, MAP_MAPLE_CITY, 15, 16, FACE_UP},
    {MAP_MAPLE_CITY, 14, 17, MAP_NORTH_PATH, 14, 1, FACE_DOWN},
    {MAP_MAPLE_CITY, 15, 17, MAP_NORTH_PATH, 15, 1, FACE_DOWN},
    {MAP_MAPLE_CITY, 16, 11, MAP_SHOP, 10, 8, FACE_UP},
    {MAP_SHOP, 10, 9, MAP_MAPLE_CITY, 16, 12, FACE_DOWN},
    {MAP_SHOP, 11, 9, MAP_MAPLE_CITY, 16, 12, FACE_DOWN},
};
#define NUM_WARPS (sizeof(warps) / sizeof(warps[0]))

enum { A_MOM, A_PROF, A_KIT, A_BALL1, A_BALL2, A_BALL3, A_GIRL, A_MAN, A_CLERK,
       S_TV, S_TOWN, S_LAB, S_KITHOUSE, S_ROUTE, S_MAPLE, S_LOCKED };

typedef struct { uint8_t map, x, y, id; } Thing;
static const Thing actors[] = {
    {MAP_HOUSE_1F, 11, 7, A_MOM},
    {MAP_LAB, 9, 4, A_PROF},
    {MAP_LAB, 6, 6, A_KIT},
    {MAP_LAB, 10, 5, A_BALL1},
    {MAP_LAB, 11, 5, A_BALL2},
    {MAP_LAB, 12, 5, A_BALL3},
    {MAP_ACORN_TOWN, 12, 14, A_GIRL},
    {MAP_MAPLE_CITY, 8, 7, A_MAN},
    {MAP_SHOP, 8, 4, A_CLERK},
};
#define NUM_ACTORS (sizeof(actors) / sizeof(actors[0]))

static const Thing signs[] = {
    {MAP_HOUSE_2F, 7, 4, S_TV},
    {MAP_ACORN_TOWN, 2, 8, S_TOWN},
    {MAP_ACORN_TOWN, 18, 12, S_LAB},
    {MAP_ACORN_TOWN, 15, 5, S_KITHOUSE},
    {MAP_NORTH_PATH, 3, 11, S_ROUTE},
    {MAP_MAPLE_CITY, 3, 9, S_MAPLE},
    {MAP_MAPLE_CITY, 3, 4, S_LOCKED},
    {MAP_MAPLE_CITY, 15, 4, S_LOCKED},
};
#define NUM_SIGNS (sizeof(signs) / sizeof(signs[0]))

static const char *const species_name[4] = {"", "SPROUTLE", "EMBERPUP", "DRIPLET"};
static const char *const species_type[4] = {"", "GRASS", "FIRE", "WATER"};
static const char *const species_move[4] = {"", "LEAF JAB", "FLARE NIP", "BUBBLE POP"};
static const uint8_t species_pic[4] = {0, T_SPROUTLE, T_EMBERPUP, T_DRIPLET};
/* the rival takes the creature that is strong against yours */
static const uint8_t counter_pick[4] = {0, SP_EMBERPUP, SP_DRIPLET, SP_SPROUTLE};
static const char *const item_name[3] = {"", "PARCEL", "DEX"};

#define MAX_HP 20

/* ------------------------------------------------------------------ scripts */

enum { OP_END, OP_TEXT, OP_TEXTQ, OP_YESNO, OP_SET0, OP_SET1, OP_GIVE, OP_TAKE, OP_WARP,
       OP_STARTER, OP_RIVAL, OP_BATTLE, OP_IF1, OP_IFNOT1, OP_PROF_APPEAR };

typedef struct { uint8_t op, a, b, c, d; const char *s; } Op;
#define T(s)      {OP_TEXT, 0, 0, 0, 0, s}
#define TQ(s)     {OP_TEXTQ, 0, 0, 0, 0, s}
#define END       {OP_END, 0, 0, 0, 0, 0}
#define DO(o, a)  {o, a, 0, 0, 0, 0}

static const Op s_mom1[] = {T("MOM: GOOD MORNING!\nOFF FOR A WALK?\nTAKE CARE OUT\nTHERE!"), END};
static const Op s_mom2[] = {T("MOM: WHAT A CUTE\nCRITTER! TAKE GOOD\nCARE OF " P_ME "!"), END};
static const Op s_tv[] = {T("A SHOW ABOUT\nPARCELS IS ON TV.\nHOW EXCITING!"), END};
static const Op s_town[] = {T("ACORN TOWN\n\nWHERE EVERY\nJOURNEY BEGINS."), END};
static const Op s_lab[] = {T("PROF. HAZEL'S\nCRITTER LAB"), END};
static const Op s_kithouse[] = {T("KIT'S HOUSE.\n\nIT'S LOCKED."), END};
static const Op s_route[] = {T("NORTH PATH\n\nNORTH: MAPLE CITY\nSOUTH: ACORN TOWN"), END};
static const Op s_maple[] = {T("MAPLE CITY\n\nA TOWN OF\nBUSY TRADERS."), END};
static const Op s_locked[] = {T("IT'S LOCKED."), END};
static const Op s_girl[] = {T("NORTH PATH LEADS\nTO MAPLE CITY.\nIT HAS A SHOP!"), END};
static const Op s_man[] = {T("THE SHOP IS THE\nBIG HOUSE BY THE\nSOUTH GATE."), END};

static const Op s_stop[] = {
    DO(OP_PROF_APPEAR, 0),
    DO(OP_SET0, F0_PROF_STOPPED),
    T("PROF. HAZEL:\nHEY! WAIT! DON'T\nGO OUT THERE!"),
    T("PROF. HAZEL:\nWILD CRITTERS HIDE\nIN THE TALL GRASS.\nCOME TO MY LAB!"),
    {OP_WARP, MAP_LAB, 11, 7, FACE_UP, 0},
    T("PROF. HAZEL:\nTHREE CRITTERS ARE\nON THAT TABLE.\nPICK ONE TO KEEP!"),
    END};

static const Op s_prof_pick[] = {T("PROF. HAZEL:\nGO ON! PICK A\nCRITTER BALL FROM\nTHE TABLE."), END};
static const Op s_prof_go[] = {T("PROF. HAZEL:\nMAPLE CITY IS UP\nNORTH PATH. GO AND\nEXPLORE!"), END};
static const Op s_prof_done[] = {T("PROF. HAZEL:\nFILL THE DEX WITH\nEVERY CRITTER YOU\nMEET. GOOD LUCK!"), END};
static const Op s_prof_parcel[] = {
    T("PROF. HAZEL:\nOH! IS THAT MY\nPARCEL FROM THE\nMAPLE CITY SHOP?"),
    DO(OP_TAKE, ITEM_PARCEL),
    DO(OP_SET0, F0_DELIVERED),
    T("YOU HANDED OVER\nTHE PARCEL."),
    T("PROF. HAZEL:\nTHANK YOU! AS A\nREWARD, TAKE THIS\nCRITTER DEX!"),
    DO(OP_GIVE, ITEM_DEX),
    DO(OP_SET0, F0_GOT_DEX),
    T("YOU RECEIVED\nTHE DEX!"),
    T("PROF. HAZEL:\nFILL IT WITH EVERY\nCRITTER YOU MEET!"),
    END};

static const Op s_kit_wait[] = {T("KIT: YO! PROF.\nHAZEL IS OUT. I'M\nWAITING FOR A\nCRITTER TOO!"), END};
static const Op s_kit_first[] = {T("KIT: NO FAIR!\nYOU GET TO PICK\nFIRST? FINE..."), END};

static const Op s_ball_no[] = {T("A CRITTER BALL.\nBETTER NOT TOUCH\nIT WITHOUT THE\nPROF'S SAY-SO."), END};
static const Op s_ball_last[] = {T("THAT'S PROF.\nHAZEL'S LAST\nCRITTER."), END};
static const Op s_ball_pick[] = {
    TQ("IT'S " P_BALL "!\nTHE " P_TYPE " CRITTER.\n\nTAKE " P_BALL "?"),
    DO(OP_YESNO, 0),
    DO(OP_STARTER, 0),
    T("YOU RECEIVED\n" P_ME "!"),
    DO(OP_RIVAL, 0),
    T("KIT: THEN I'LL\nTAKE " P_RIVAL "!"),
    T("KIT: WAIT! LET'S\nSEE WHOSE CRITTER\nIS STRONGER!"),
    DO(OP_BATTLE, 0),
    DO(OP_IF1, F1_BATTLE_WON),
    T("KIT: WHAT? I LOST?\nI'LL TRAIN HARDER!"),
    DO(OP_IFNOT1, F1_BATTLE_WON),
    T("KIT: HA HA! I WON!\nTOLD YOU MINE WAS\nSTRONGER!"),
    T("KIT: SEE YOU\nAROUND!"),
    DO(OP_SET1, F1_RIVAL_LEFT),
    T("PROF. HAZEL:\nYOUR CRITTER IS\nRESTED. MAPLE CITY\nIS UP NORTH PATH."),
    END};

static const Op s_clerk_give[] = {
    T("CLERK: HI! YOU'RE\nFROM ACORN TOWN?\nPLEASE TAKE THIS\nPARCEL TO HAZEL!"),
    DO(OP_GIVE, ITEM_PARCEL),
    DO(OP_SET0, F0_GOT_PARCEL),
    T("YOU RECEIVED\nTHE PARCEL!"),
    END};
static const Op s_clerk_hi[] = {T("CLERK: SAY HI TO\nPROF. HAZEL!"), END};

/* ------------------------------------------------------------------ state */

static const Op *scr;          /* running script, or 0 */
static uint8_t yesno_open;

/* ------------------------------------------------------------------ low level */

static void wait_vbl(void) {
    vblank_flag = 0;
    while (!vblank_flag) {
        __asm__("halt");
        __asm__("nop");
    }
}

static uint8_t read_keys(void) {
    uint8_t d, b;
    rP1 = 0x20;
    d = rP1; d = rP1;
    rP1 = 0x10;
    b = rP1; b = rP1; b = rP1; b = rP1;
    rP1 = 0x30;
    d = (~d) & 0x0F;
    b = (~b) & 0x0F;
    return (uint8_t)(d << 4) | b;
}

static void rng_step(void) {
    uint8_t r = G_RNG;
    uint8_t lsb = r & 1;
    r >>= 1;
    if (lsb) r ^= 0xB8;
    G_RNG = r;
}

static void put(uint8_t x, uint8_t y, uint8_t t) {
    shadow[row_off[y] + x] = t;
    dirty[y] = 1;
}

/* ------------------------------------------------------------------ world rendering */

static uint8_t actor_tile(uint8_t id) {
    uint8_t f0 = G_FLAGS0, f1 = G_FLAGS1;
    switch (id) {
    case A_MOM: return T_MOM;
    case A_PROF: return (f0 & F0_PROF_STOPPED) ? T_PROF : 0;
    case A_KIT: return (f1 & F1_RIVAL_LEFT) ? 0 : T_RIVAL;
    case A_BALL1: case A_BALL2: case A_BALL3: {
        uint8_t sp = id - A_BALL1 + 1;
        if ((G_PARTY_COUNT && G_PARTY[0] == sp) || G_RIVAL == sp) return 0;
        return T_BALL;
    }
    case A_GIRL: return T_GIRL;
    case A_MAN: return T_MAN;
    case A_CLERK: return T_CLERK;
    }
    return 0;
}

/* index of the visible actor standing at (x, y) on this map, or 0xFF */
static uint8_t actor_at(uint8_t x, uint8_t y) {
    uint8_t i;
    for (i = 0; i < NUM_ACTORS; i++) {
        if (actors[i].map == G_MAP && actors[i].x == x && actors[i].y == y && actor_tile(actors[i].id))
            return i;
    }
    return 0xFF;
}

/* redraw rows y0..y1 (inclusive) from the map, actors and the player */
static void draw_rows(uint8_t y0, uint8_t y1) {
    uint8_t i, y, t, m = G_MAP;
    const uint8_t *src = map_tiles[m];
    memcpy(shadow + row_off[y0], src + row_off[y0], (uint16_t)row_off[y1] - row_off[y0] + MAP_W);
    for (y = y0; y <= y1; y++) dirty[y] = 1;
    for (i = 0; i < NUM_ACTORS; i++) {
        if (actors[i].map != m) continue;
        y = actors[i].y;
        if (y < y0 || y > y1) continue;
        t = actor_tile(actors[i].id);
        if (t) shadow[row_off[y] + actors[i].x] = t;
    }
    y = G_Y;
    if (y >= y0 && y <= y1) shadow[row_off[y] + G_X] = T_PLAYER_D + G_FACING;
}

static void draw_cell(uint8_t x, uint8_t y) {
    put(x, y, map_tiles[G_MAP][row_off[y] + x]);
}

static void draw_player(void) {
    put(G_X, G_Y, T_PLAYER_D + G_FACING);
}

static void enter_map(uint8_t m, uint8_t x, uint8_t y, uint8_t face) {
    G_MAP = m;
    G_X = x;
    G_Y = y;
    G_FACING = face;
    if (m == MAP_ACORN_TOWN) G_FLAGS0 |= F0_LEFT_HOUSE;
    if (m == MAP_MAPLE_CITY) G_FLAGS0 |= F0_REACHED_MAPLE;
    draw_rows(0, MAP_H - 1);
}

/* ------------------------------------------------------------------ boxes and text */

static void draw_box(uint8_t x0, uint8_t y0, uint8_t x1, uint8_t y1) {
    uint8_t x, y;
    for (y = y0; y <= y1; y++) {
        uint8_t *row = shadow + row_off[y];
        uint8_t l, mid, r;
        if (y == y0) { l = T_BOX_TL; mid = T_BOX_T; r = T_BOX_TR; }
        else if (y == y1) { l = T_BOX_BL; mid = T_BOX_B; r = T_BOX_BR; }
        else { l = T_BOX_L; mid = T_BLANK; r = T_BOX_R; }
        row[x0] = l;
        for (x = x0 + 1; x < x1; x++) row[x] = mid;
        row[x1] = r;
        dirty[y] = 1;
    }
}

static const char *placeholder(uint8_t c) {
    switch (c) {
    case 1: return species_name[G_PARTY[0]];
    case 2: return species_name[G_RIVAL];
    case 3: return species_name[G_BALL];
    case 4: return species_type[G_BALL];
    case 5: return species_move[G_PARTY[0]];
    case 6: return species_move[G_RIVAL];
    }
    return "";
}

/* write text at (x, y); '\n' starts the next row at x. Returns nothing. */
static void put_text(uint8_t x, uint8_t y, const char *s) {
    uint8_t cx = x;
    char c;
    while ((c = *s++) != 0) {
        if (c == '\n') { y++; cx = x; continue; }
        if ((uint8_t)c < 8) {
            const char *p = placeholder((uint8_t)c);
            while (*p) put(cx++, y, (uint8_t)*p++);
            continue;
        }
        put(cx++, y, (uint8_t)c);
    }
}

static void put_num2(uint8_t x, uint8_t y, uint8_t n) {
    uint8_t tens = 0;
    while (n >= 10) { n -= 10; tens++; }
    put(x, y, tens ? '0' + tens : ' ');
    put(x + 1, y, '0' + n);
}

/* dialogue box over rows 12..17; 4 lines of 18 characters */
static void show_text(const char *s, uint8_t wait) {
    draw_box(0, 12, 19, 17);
    put_text(1, 13, s);
    if (wait) put(18, 17, '^');
    G_TEXT = 1;
}

static void close_text(void) {
    G_TEXT = 0;
    if (G_BATTLE) return;
    draw_rows(12, 17);
}

/* ------------------------------------------------------------------ menus */

static void draw_cursor_rows(uint8_t x, uint8_t y, uint8_t n, uint8_t step) {
    uint8_t i;
    for (i = 0; i < n; i++) put(x, y + i * step, (i == G_CURSOR) ? '>' : ' ');
}

static void open_start(void) {
    G_MENU = MENU_START;
    G_CURSOR = 0;
    draw_box(12, 0, 19, 3);
    put_text(14, 1, "BAG\nEXIT");
    draw_cursor_rows(13, 1, 2, 1);
}

static void close_menus(void) {
    G_MENU = MENU_NONE;
    G_CURSOR = 0;
    draw_rows(0, 11);
}

static void open_bag(void) {
    uint8_t i, n = G_BAG_COUNT;
    G_MENU = MENU_BAG;
    G_CURSOR = 0;
    draw_box(4, 0, 19, 11);
    put_text(6, 1, "BAG");
    if (n == 0) put_text(6, 3, "NO ITEMS");
    for (i = 0; i < n; i++) put_text(6, 3 + i, item_name[G_BAG[i]]);
    put_text(6, 10, "B: BACK");
}

static void open_yesno(void) {
    G_MENU = MENU_YESNO;
    G_CURSOR = 0;
    yesno_open = 1;
    draw_box(14, 8, 19, 11);
    put_text(16, 9, "YES\nNO");
    draw_cursor_rows(15, 9, 2, 1);
}

/* ------------------------------------------------------------------ bag */

static void bag_give(uint8_t item) {
    uint8_t n = G_BAG_COUNT;
    if (n >= 8) return;
    G_BAG[n] = item;
    G_BAG_COUNT = n + 1;
}

static void bag_take(uint8_t item) {
    uint8_t i, j, n = G_BAG_COUNT;
    for (i = 0; i < n; i++) {
        if (G_BAG[i] == item) {
            for (j = i; j + 1 < n; j++) G_BAG[j] = G_BAG[j + 1];
            G_BAG[n - 1] = 0;
            G_BAG_COUNT = n - 1;
            return;
        }
    }
}

/* ------------------------------------------------------------------ battle */

enum { BP_TO_MENU = 1, BP_TO_ENEMY, BP_TO_WON, BP_TO_LOST, BP_TO_END };

static void draw_hp(uint8_t x, uint8_t y, uint8_t hp) {
    uint8_t i, px = hp * 2; /* 40 px for MAX_HP = 20 */
    put(x, y, 'H');
    put(x + 1, y, 'P');
    put(x + 2, y, T_HP_L);
    for (i = 0; i < 5; i++) {
        uint8_t f = px >= 8 ? 8 : px;
        put(x + 3 + i, y, T_HP_0 + f);
        px -= f;
    }
    put(x + 8, y, T_HP_R);
    put_num2(x + 4, y + 1, hp);
    put(x + 6, y + 1, '/');
    put_num2(x + 7, y + 1, MAX_HP);
}

static void draw_pic(uint8_t x, uint8_t y, uint8_t species) {
    uint8_t i, j, t = species_pic[species];
    for (j = 0; j < 4; j++)
        for (i = 0; i < 4; i++) put(x + i, y + j, t++);
}

static void draw_battle(void) {
    memset(shadow, T_BLANK, sizeof(shadow));
    memset(dirty, 1, sizeof(dirty));
    put_text(1, 1, "KIT'S");
    put_text(1, 2, species_name[G_RIVAL]);
    draw_hp(1, 3, G_ENEMY_HP);
    draw_pic(14, 1, G_RIVAL);
    draw_pic(2, 7, G_PARTY[0]);
    put_text(9, 7, species_name[G_PARTY[0]]);
    draw_hp(9, 8, G_PLAYER_HP);
}

static void battle_text(const char *s, uint8_t next) {
    G_MENU = MENU_NONE;
    G_BPHASE = next;
    show_text(s, 1);
}

static void battle_menu(void) {
    G_BPHASE = 0;
    G_TEXT = 0;
    G_MENU = MENU_FIGHT;
    draw_box(0, 12, 19, 17);
    put_text(1, 13, "WHAT WILL " P_ME "\nDO?");
    put_text(3, 15, "FIGHT");
    put_text(12, 15, "RUN");
    put(2, 15, G_CURSOR == 0 ? '>' : ' ');
    put(11, 15, G_CURSOR == 1 ? '>' : ' ');
}

static uint8_t roll_damage(void) {
    rng_step();
    return 3 + (G_RNG & 3);
}

static void battle_start(void) {
    G_BATTLE = 1;
    G_PLAYER_HP = MAX_HP;
    G_ENEMY_HP = MAX_HP;
    G_CURSOR = 0;
    draw_battle();
    battle_text("KIT SENT OUT\n" P_RIVAL "!\n\nGO, " P_ME "!", BP_TO_MENU);
}

static void battle_end(void) {
    G_BATTLE = 0;
    G_TEXT = 0;
    G_MENU = MENU_NONE;
    G_BPHASE = 0;
    G_PLAYER_HP = MAX_HP;       /* rested after the battle */
    G_FLAGS0 |= F0_BATTLE_DONE;
    draw_rows(0, MAP_H - 1);    /* back in the lab */
}

static void script_continue(void);

static void battle_input(uint8_t k) {
    uint8_t hp, d;
    if (G_MENU == MENU_FIGHT) {
        if (k & (K_LEFT | K_RIGHT | K_UP | K_DOWN)) {
            G_CURSOR ^= 1;
            battle_menu();
        } else if (k & K_A) {
            if (G_CURSOR == 0) {
                d = roll_damage();
                hp = G_ENEMY_HP;
                hp = hp > d ? hp - d : 0;
                G_ENEMY_HP = hp;
                draw_hp(1, 3, hp);
                battle_text(P_ME " USED\n" P_MYMOVE "!", hp ? BP_TO_ENEMY : BP_TO_WON);
            } else {
                battle_text("NO! THERE'S NO\nRUNNING FROM A\nRIVAL BATTLE!", BP_TO_MENU);
            }
        }
        return;
    }
    if (!(k & (K_A | K_B))) return;
    switch (G_BPHASE) {
    case BP_TO_MENU:
        battle_menu();
        break;
    case BP_TO_ENEMY:
        d = roll_damage() + 1; /* the rival's creature has the type edge */
        hp = G_PLAYER_HP;
        hp = hp > d ? hp - d : 0;
        G_PLAYER_HP = hp;
        draw_hp(9, 8, hp);
        battle_text("KIT'S " P_RIVAL "\nUSED " P_RVMOVE "!", hp ? BP_TO_MENU : BP_TO_LOST);
        break;
    case BP_TO_WON:
        G_BATTLE = 2;
        G_FLAGS1 |= F1_BATTLE_WON;
        battle_text("KIT'S " P_RIVAL "\nFAINTED!\n\nYOU WON!", BP_TO_END);
        break;
    case BP_TO_LOST:
        G_BATTLE = 3;
        battle_text(P_ME " FAINTED!\n\nYOU LOST TO KIT.", BP_TO_END);
        break;
    case BP_TO_END:
        battle_end();
        script_continue();
        break;
    }
}

/* ------------------------------------------------------------------ scripts */

static void script_start(const Op *s) {
    scr = s;
    script_continue();
}

static void script_continue(void) {
    const Op *o;
    for (;;) {
        o = scr++;
        switch (o->op) {
        case OP_END:
            scr = 0;
            close_text();
            return;
        case OP_TEXT:
            show_text(o->s, 1);
            return;
        case OP_TEXTQ:
            show_text(o->s, 0);
            break;
        case OP_YESNO:
            open_yesno();
            return;
        case OP_SET0:
            G_FLAGS0 |= o->a;
            break;
        case OP_SET1:
            G_FLAGS1 |= o->a;
            draw_rows(0, 11);
            break;
        case OP_GIVE:
            bag_give(o->a);
            break;
        case OP_TAKE:
            bag_take(o->a);
            break;
        case OP_WARP:
            enter_map(o->a, o->b, o->c, o->d);
            break;
        case OP_STARTER:
            G_PARTY[0] = G_BALL;
            G_PARTY_COUNT = 1;
            G_FLAGS0 |= F0_GOT_STARTER;
            draw_rows(0, 11);
            break;
        case OP_RIVAL:
            G_RIVAL = counter_pick[G_PARTY[0]];
            G_FLAGS1 |= F1_RIVAL_CHOSE;
            draw_rows(0, 11);
            break;
        case OP_BATTLE:
            battle_start();
            return;
        case OP_IF1:
            if (!(G_FLAGS1 & o->a)) scr++;
            break;
        case OP_IFNOT1:
            if (G_FLAGS1 & o->a) scr++;
            break;
        case OP_PROF_APPEAR:
            put(G_X, G_Y + 1, T_PROF);
            break;
        }
    }
}

static const Op *actor_script(uint8_t id) {
    uint8_t f0 = G_FLAGS0;
    switch (id) {
    case A_MOM: return (f0 & F0_GOT_STARTER) ? s_mom2 : s_mom1;
    case A_PROF:
        if (!(f0 & F0_GOT_STARTER)) return s_prof_pick;
        if (f0 & F0_GOT_DEX) return s_prof_done;
        if (f0 & F0_GOT_PARCEL) return s_prof_parcel;
        return s_prof_go;
    case A_KIT: return (f0 & F0_PROF_STOPPED) ? s_kit_first : s_kit_wait;
    case A_BALL1: case A_BALL2: case A_BALL3:
        G_BALL = id - A_BALL1 + 1;
        if (!(f0 & F0_PROF_STOPPED)) return s_ball_no;
        if (f0 & F0_GOT_STARTER) return s_ball_last;
        return s_ball_pick;
    case A_GIRL: return s_girl;
    case A_MAN: return s_man;
    case A_CLERK: return (f0 & F0_GOT_PARCEL) ? s_clerk_hi : s_clerk_give;
    case S_TV: return s_tv;
    case S_TOWN: return s_town;
    case S_LAB: return s_lab;
    case S_KITHOUSE: return s_kithouse;
    case S_ROUTE: return s_route;
    case S_MAPLE: return s_maple;
    case S_LOCKED: return s_locked;
    }
    return 0;
}

/* ------------------------------------------------------------------ overworld */

static const int8_t dir_dx[4] = {0, 0, -1, 1};
static const int8_t dir_dy[4] = {1, -1, 0, 0};

/* 1 if the cell is on the map and can be entered */
static uint8_t walkable(uint8_t x, uint8_t y) {
    if (x >= MAP_W || y >= MAP_H) return 0;
    if (map_kind[G_MAP][row_off[y] + x] != KIND_WALK) return 0;
    return actor_at(x, y) == 0xFF;
}

static void try_move(uint8_t face) {
    uint8_t nx = G_X + dir_dx[face];
    uint8_t ny = G_Y + dir_dy[face];
    uint8_t i;
    G_FACING = face;
    if (!walkable(nx, ny)) {
        draw_player();
        return;
    }
    draw_cell(G_X, G_Y);
    G_X = nx;
    G_Y = ny;
    G_STEPS++;
    draw_player();
    for (i = 0; i < NUM_WARPS; i++) {
        const Warp *w = &warps[i];
        if (w->map == G_MAP && w->x == nx && w->y == ny) {
            enter_map(w->dmap, w->dx, w->dy, w->dface);
            return;
        }
    }
    /* trying to leave town without a partner: the professor stops you */
    if (G_MAP == MAP_ACORN_TOWN && ny == 1 && !(G_FLAGS0 & F0_GOT_STARTER))
        script_start(s_stop);
}

static void interact(void) {
    uint8_t f = G_FACING;
    uint8_t tx = G_X + dir_dx[f];
    uint8_t ty = G_Y + dir_dy[f];
    uint8_t i;
    if (tx >= MAP_W || ty >= MAP_H) return;
    i = actor_at(tx, ty);
    if (i == 0xFF && map_kind[G_MAP][row_off[ty] + tx] == KIND_REACH) {
        /* talk across a counter or table */
        i = actor_at(tx + dir_dx[f], ty + dir_dy[f]);
    }
    if (i != 0xFF) {
        script_start(actor_script(actors[i].id));
        return;
    }
    for (i = 0; i < NUM_SIGNS; i++) {
        if (signs[i].map == G_MAP && signs[i].x == tx && signs[i].y == ty) {
            script_start(actor_script(signs[i].id));
            return;
        }
    }
}

static void handle(uint8_t k) {
    if (k & K_SELECT) return;                    /* SELECT does nothing anywhere */
    if (G_BATTLE) { battle_input(k); return; }
    if (G_MENU == MENU_YESNO) {
        if (k & (K_UP | K_DOWN)) {
            G_CURSOR ^= 1;
            draw_cursor_rows(15, 9, 2, 1);
        } else if (k & (K_A | K_B)) {
            uint8_t yes = (k & K_A) && G_CURSOR == 0;
            G_MENU = MENU_NONE;
            G_CURSOR = 0;
            yesno_open = 0;
            draw_rows(8, 11);
            if (yes) script_continue();
            else { scr = 0; close_text(); }
        }
        return;
    }
    if (G_TEXT) {
        if (k & (K_A | K_B)) script_continue();
        return;
    }
    if (G_MENU == MENU_START) {
        if (k & (K_UP | K_DOWN)) {
            G_CURSOR ^= 1;
            draw_cursor_rows(13, 1, 2, 1);
        } else if (k & K_A) {
            if (G_CURSOR == 0) open_bag();
            else close_menus();
        } else if (k & (K_B | K_START)) {
            close_menus();
        }
        return;
    }
    if (G_MENU == MENU_BAG) {
        if (k & (K_A | K_B)) {
            draw_rows(0, 11);
            open_start();
        }
        return;
    }
    /* overworld */
    if (k & K_DOWN) try_move(FACE_DOWN);
    else if (k & K_UP) try_move(FACE_UP);
    else if (k & K_LEFT) try_move(FACE_LEFT);
    else if (k & K_RIGHT) try_move(FACE_RIGHT);
    else if (k & K_A) interact();
    else if (k & K_START) open_start();
}

/* ------------------------------------------------------------------ main */

static void init(void) {
    if (rLCDC & 0x80) {
        while (rLY != 144) {}
        rLCDC = 0;
    }
    rBGP = 0xE4;
    rSCX = 0;
    rSCY = 0;
    memcpy((uint8_t *)0x8000, tile_gfx, sizeof(tile_gfx));
    memset((uint8_t *)0x9800, T_BLANK, 0x400);
    G_RNG = 0xA5;
    enter_map(MAP_HOUSE_2F, 10, 7, FACE_DOWN);
    flush_rows(1);
    rLCDC = 0x91;  /* LCD on, BG tiles at 0x8000, BG map 0x9800, BG on */
    rIF = 0;
    rIE = 0x01;    /* VBlank only */
    __asm__("ei");
    keys_prev = read_keys();
    G_MAGIC = MAGIC_READY;
}

void main(void) {
    uint8_t k, pressed;
    init();
    for (;;) {
        wait_vbl();
        flush_rows(0);
        k = read_keys();
        pressed = k & (uint8_t)~keys_prev;
        keys_prev = k;
        if (pressed & (uint8_t)~K_SELECT) {   /* SELECT does nothing at all */
            rng_step();     /* the RNG moves with input only, so outcomes depend on the inputs alone */
            handle(pressed);
        }
    }
}
