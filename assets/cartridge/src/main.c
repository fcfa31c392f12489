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
#include "tables.h"

uint8_t shadow[MAP_W * MAP_H];
uint8_t dirty[MAP_H];
volatile uint8_t vblank_flag;
static uint8_t keys_prev;

static const uint16_t row_off[MAP_H] = {
    0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220, 240, 260, 280, 300, 320, 340};

/* ------------------------------------------------------------------ world data */

/* Maps, warps, actors, signs, the start, the professor's stop, the ball order, the creatures'
 * names and every dialogue page live in the data tables at a fixed ROM address (tables.h,
 * TABLES.md), so a variant of the game is a different table block and the same code. */

enum { A_MOM, A_PROF, A_KIT, A_BALL1, A_BALL2, A_BALL3, A_GIRL, A_MAN, A_CLERK };

#define ACTOR(i) (TB_ACTORS + ((uint8_t)(i) << 2))   /* map, x, y, 0 */
#define MAP_TILES(m) (TB_TILES + (uint16_t)(m) * (MAP_W * MAP_H))
#define MAP_KINDS(m) (TB_KINDS + (uint16_t)(m) * (MAP_W * MAP_H))

static const char *text_of(uint8_t id) {
    return (const char *)(TB_TEXT_PTRS[id << 1] | ((uint16_t)TB_TEXT_PTRS[(id << 1) + 1] << 8));
}

static const char *species_name(uint8_t sp) {
    return (const char *)(TB_SPECIES + sp * NAME_SLOT);
}

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

#define TX_SIGN 0xFF   /* the page of the sign being read (sign_text) */

typedef struct { uint8_t op, a, s; } Op;
#define T(t)      {OP_TEXT, 0, t}
#define TQ(t)     {OP_TEXTQ, 0, t}
#define END       {OP_END, 0, 0}
#define DO(o, a)  {o, a, 0}

static const Op s_mom1[] = {T(TX_MOM1), END};
static const Op s_mom2[] = {T(TX_MOM2), END};
static const Op s_sign[] = {T(TX_SIGN), END};
static const Op s_girl[] = {T(TX_GIRL), END};
static const Op s_man[] = {T(TX_MAN), END};

static const Op s_stop[] = {
    DO(OP_PROF_APPEAR, 0),
    DO(OP_SET0, F0_PROF_STOPPED),
    T(TX_STOP1),
    T(TX_STOP2),
    DO(OP_WARP, 0),               /* to the lab: TB_STOP's destination */
    T(TX_STOP3),
    END};

static const Op s_prof_pick[] = {T(TX_PROF_PICK), END};
static const Op s_prof_go[] = {T(TX_PROF_GO), END};
static const Op s_prof_done[] = {T(TX_PROF_DONE), END};
static const Op s_prof_parcel[] = {
    T(TX_PARCEL1),
    DO(OP_TAKE, ITEM_PARCEL),
    DO(OP_SET0, F0_DELIVERED),
    T(TX_HANDED),
    T(TX_PARCEL2),
    DO(OP_GIVE, ITEM_DEX),
    DO(OP_SET0, F0_GOT_DEX),
    T(TX_GOT_DEX),
    T(TX_PARCEL3),
    END};

static const Op s_kit_wait[] = {T(TX_RIVAL_WAIT), END};
static const Op s_kit_first[] = {T(TX_RIVAL_FIRST), END};

static const Op s_ball_no[] = {T(TX_BALL_NO), END};
static const Op s_ball_last[] = {T(TX_BALL_LAST), END};
static const Op s_ball_pick[] = {
    TQ(TX_BALL_PICK),
    DO(OP_YESNO, 0),
    DO(OP_STARTER, 0),
    T(TX_GOT_ME),
    DO(OP_RIVAL, 0),
    T(TX_RIVAL_TAKE),
    T(TX_RIVAL_DARE),
    DO(OP_BATTLE, 0),
    DO(OP_IF1, F1_BATTLE_WON),
    T(TX_RIVAL_LOST),
    DO(OP_IFNOT1, F1_BATTLE_WON),
    T(TX_RIVAL_WON),
    T(TX_RIVAL_BYE),
    DO(OP_SET1, F1_RIVAL_LEFT),
    T(TX_RESTED),
    END};

static const Op s_clerk_give[] = {
    T(TX_CLERK_GIVE),
    DO(OP_GIVE, ITEM_PARCEL),
    DO(OP_SET0, F0_GOT_PARCEL),
    T(TX_GOT_PARCEL),
    END};
static const Op s_clerk_hi[] = {T(TX_CLERK_HI), END};

/* ------------------------------------------------------------------ state */

static const Op *scr;          /* running script, or 0 */
static uint8_t yesno_open;
static uint8_t sign_text;     /* page of the sign being read */

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
        uint8_t sp = TB_BALLS[id - A_BALL1];
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
        const uint8_t *a = ACTOR(i);
        if (a[0] == G_MAP && a[1] == x && a[2] == y && actor_tile(i))
            return i;
    }
    return 0xFF;
}

/* redraw rows y0..y1 (inclusive) from the map, actors and the player */
static void draw_rows(uint8_t y0, uint8_t y1) {
    uint8_t i, y, t, m = G_MAP;
    const uint8_t *src = MAP_TILES(m);
    memcpy(shadow + row_off[y0], src + row_off[y0], (uint16_t)row_off[y1] - row_off[y0] + MAP_W);
    for (y = y0; y <= y1; y++) dirty[y] = 1;
    for (i = 0; i < NUM_ACTORS; i++) {
        const uint8_t *a = ACTOR(i);
        if (a[0] != m) continue;
        y = a[2];
        if (y < y0 || y > y1) continue;
        t = actor_tile(i);
        if (t) shadow[row_off[y] + a[1]] = t;
    }
    y = G_Y;
    if (y >= y0 && y <= y1) shadow[row_off[y] + G_X] = T_PLAYER_D + G_FACING;
}

static void draw_cell(uint8_t x, uint8_t y) {
    put(x, y, MAP_TILES(G_MAP)[row_off[y] + x]);
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
    case 1: return species_name(G_PARTY[0]);
    case 2: return species_name(G_RIVAL);
    case 3: return species_name(G_BALL);
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
    put_text(1, 1, text_of(TX_BATTLE_LABEL));
    put_text(1, 2, species_name(G_RIVAL));
    draw_hp(1, 3, G_ENEMY_HP);
    draw_pic(14, 1, G_RIVAL);
    draw_pic(2, 7, G_PARTY[0]);
    put_text(9, 7, species_name(G_PARTY[0]));
    draw_hp(9, 8, G_PLAYER_HP);
}

static void battle_text(uint8_t tx, uint8_t next) {
    G_MENU = MENU_NONE;
    G_BPHASE = next;
    show_text(text_of(tx), 1);
}

static void battle_menu(void) {
    G_BPHASE = 0;
    G_TEXT = 0;
    G_MENU = MENU_FIGHT;
    draw_box(0, 12, 19, 17);
    put_text(1, 13, text_of(TX_BATTLE_ASK));
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
    battle_text(TX_SENT_OUT, BP_TO_MENU);
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
                battle_text(TX_MY_MOVE, hp ? BP_TO_ENEMY : BP_TO_WON);
            } else {
                battle_text(TX_NO_RUN, BP_TO_MENU);
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
        battle_text(TX_RIVAL_MOVE, hp ? BP_TO_MENU : BP_TO_LOST);
        break;
    case BP_TO_WON:
        G_BATTLE = 2;
        G_FLAGS1 |= F1_BATTLE_WON;
        battle_text(TX_RIVAL_FAINTED, BP_TO_END);
        break;
    case BP_TO_LOST:
        G_BATTLE = 3;
        battle_text(TX_MY_FAINTED, BP_TO_END);
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
            show_text(text_of(o->s == TX_SIGN ? sign_text : o->s), 1);
            return;
        case OP_TEXTQ:
            show_text(text_of(o->s), 0);
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
            enter_map(TB_STOP[2], TB_STOP[3], TB_STOP[4], TB_STOP[5]);
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
        G_BALL = TB_BALLS[id - A_BALL1];
        if (!(f0 & F0_PROF_STOPPED)) return s_ball_no;
        if (f0 & F0_GOT_STARTER) return s_ball_last;
        return s_ball_pick;
    case A_GIRL: return s_girl;
    case A_MAN: return s_man;
    case A_CLERK: return (f0 & F0_GOT_PARCEL) ? s_clerk_hi : s_clerk_give;
    }
    return 0;
}

/* ------------------------------------------------------------------ overworld */

static const int8_t dir_dx[4] = {0, 0, -1, 1};
static const int8_t dir_dy[4] = {1, -1, 0, 0};

/* 1 if the cell is on the map and can be entered */
static uint8_t walkable(uint8_t x, uint8_t y) {
    if (x >= MAP_W || y >= MAP_H) return 0;
    if (MAP_KINDS(G_MAP)[row_off[y] + x] != KIND_WALK) return 0;
    return actor_at(x, y) == 0xFF;
}

static void try_move(uint8_t face) {
    uint8_t nx = G_X + dir_dx[face];
    uint8_t ny = G_Y + dir_dy[face];
    uint8_t i, n;
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
    n = TB_WARPS[0];
    for (i = 0; i < n; i++) {
        const uint8_t *w = TB_WARPS + 1 + i * 7;   /* map, x, y, to map, x, y, facing */
        if (w[0] == G_MAP && w[1] == nx && w[2] == ny) {
            enter_map(w[3], w[4], w[5], w[6]);
            return;
        }
    }
    /* trying to leave town without a partner: the professor stops you */
    if (G_MAP == TB_STOP[0] && ny == TB_STOP[1] && !(G_FLAGS0 & F0_GOT_STARTER))
        script_start(s_stop);
}

static void interact(void) {
    uint8_t f = G_FACING;
    uint8_t tx = G_X + dir_dx[f];
    uint8_t ty = G_Y + dir_dy[f];
    uint8_t i, n;
    const uint8_t *sg;
    if (tx >= MAP_W || ty >= MAP_H) return;
    i = actor_at(tx, ty);
    if (i == 0xFF && MAP_KINDS(G_MAP)[row_off[ty] + tx] == KIND_REACH) {
        /* talk across a counter or table */
        i = actor_at(tx + dir_dx[f], ty + dir_dy[f]);
    }
    if (i != 0xFF) {
        script_start(actor_script(i));
        return;
    }
    n = TB_SIGNS[0];
    for (i = 0; i < n; i++) {
        sg = TB_SIGNS + 1 + (i << 2);   /* map, x, y, text */
        if (sg[0] == G_MAP && sg[1] == tx && sg[2] == ty) {
            sign_text = sg[3];
            script_start(s_sign);
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
    enter_map(TB_START[0], TB_START[1], TB_START[2], TB_START[3]);
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
