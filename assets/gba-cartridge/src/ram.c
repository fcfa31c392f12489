/* The RAM Parcel Quest Advance keeps where the layout header (layout_firered.h) says: the two save
 * blocks behind their IWRAM pointers, moved on every map load and battle with a fresh bag key; the
 * flags, vars and bag pockets inside them; the party as 100-byte struct Pokemon records with
 * encrypted substructures. Everything here is written from the facts cited in the header. */
#include "game.h"

static u32 rng_state;

/* pret/pokefirered src/random.c: ISO C LCG, the high half returned */
u16 rand16(void)
{
    rng_state = rng_state * 1103515245u + 24691u;
    return (u16)(rng_state >> 16);
}

void *memcpy(void *dst, const void *src, unsigned n)
{
    u8 *d = dst;
    const u8 *s = src;
    while (n--)
        *d++ = *s++;
    return dst;
}

void *memset(void *dst, int c, unsigned n)
{
    u8 *d = dst;
    while (n--)
        *d++ = (u8)c;
    return dst;
}

#define PTR(addr) (*(u8 *volatile *)(addr))

u8 *sb1(void) { return PTR(ADDR_SB1_PTR); }
u8 *sb2(void) { return PTR(ADDR_SB2_PTR); }

static u16 rd16(const u8 *p) { return (u16)(p[0] | (p[1] << 8)); }
static u32 rd32(const u8 *p) { return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24); }
static void wr16(u8 *p, u16 v) { p[0] = (u8)v; p[1] = (u8)(v >> 8); }
static void wr32(u8 *p, u32 v) { wr16(p, (u16)v); wr16(p + 2, (u16)(v >> 16)); }

/* word copy that tolerates overlap (a block moves by at most 124 bytes) */
static void move_words(u32 *dst, const u32 *src, u32 words)
{
    if (dst < src) {
        for (u32 i = 0; i < words; i++)
            dst[i] = src[i];
    } else if (dst > src) {
        for (u32 i = words; i-- > 0;)
            dst[i] = src[i];
    }
}

static const u32 pockets[3][2] = {
    {SB1_POCKET_ITEMS, POCKET_ITEMS_COUNT},
    {SB1_POCKET_KEY, POCKET_KEY_COUNT},
    {SB1_POCKET_BALLS, POCKET_BALLS_COUNT},
};

/* src/load_save.c MoveSaveBlocks_ResetHeap: both blocks to base + (Random() & 0x7C), then a new
 * key = (Random() << 16) + Random() applied to every bag slot's quantity (src/load_save.c
 * ApplyNewEncryptionKeyToAllEncryptedData -> ApplyNewEncryptionKeyToBagItems). */
void saveblocks_move(void)
{
    u8 *old1 = sb1(), *old2 = sb2();
#if defined(SAVEBLOCK_OFFSET_USES_TRAINER_ID)
    /* pokeemerald src/load_save.c: (trainer-id byte sum + Random()) & (SAVEBLOCK_MOVE_RANGE - 4) */
    const u8 *tid = old2 + SB2_TRAINER_ID;
    u32 offset = (u32)(tid[0] + tid[1] + tid[2] + tid[3] + rand16()) & (SAVEBLOCK_MOVE_RANGE - 4);
#else
    u32 offset = rand16() & ((SAVEBLOCK_MOVE_RANGE - 1) & ~3u);
#endif
    u8 *new1 = (u8 *)(ADDR_SB1 + offset), *new2 = (u8 *)(ADDR_SB2 + offset);
    move_words((u32 *)new2, (const u32 *)old2, SB2_SIZE / 4);
    move_words((u32 *)new1, (const u32 *)old1, SB1_SIZE / 4);
    PTR(ADDR_SB2_PTR) = new2;
    PTR(ADDR_SB1_PTR) = new1;
    u32 old_key = rd32(new2 + SB2_ENC_KEY);
    u32 key = ((u32)rand16() << 16) + rand16();
    u16 change = (u16)(old_key ^ key);
    for (int p = 0; p < 3; p++)
        for (u32 i = 0; i < pockets[p][1]; i++) {
            u8 *q = new1 + pockets[p][0] + i * 4 + 2;
            wr16(q, rd16(q) ^ change);
        }
#if defined(SB1_MONEY)
    /* ApplyNewEncryptionKeyToWord(&gSaveBlock1Ptr->money, key): the whole 32-bit key */
    wr32(new1 + SB1_MONEY, rd32(new1 + SB1_MONEY) ^ old_key ^ key);
#endif
    wr32(new2 + SB2_ENC_KEY, key);
}

static const u8 player_name[] = {0xCC, 0xC9, 0xD1, 0xBB, 0xC8, 0xFF, 0xFF, 0xFF}; /* "ROWAN" */

void ram_power_on(void)
{
    rng_state = 0x5EED0A4Bu;
    memset((void *)ADDR_SB1, 0, SB1_SIZE + SAVEBLOCK_MOVE_RANGE);
    memset((void *)ADDR_SB2, 0, SB2_SIZE + SAVEBLOCK_MOVE_RANGE);
    memset((void *)ADDR_PARTY, 0, PARTY_SIZE * MON_SIZE);
    *(volatile u8 *)ADDR_PARTY_COUNT = 0;
    *(volatile u8 *)ADDR_BATTLE_OUTCOME = 0;
    *(volatile u8 *)ADDR_MSGBOX_TYPE = MSGBOX_HIDDEN;
    *(volatile u8 *)(ADDR_MAIN + MAIN_BITS_OFFSET) = 0;
    /* src/load_save.c SetSaveBlocksPointers at boot */
    u32 offset = rand16() & ((SAVEBLOCK_MOVE_RANGE - 1) & ~3u);
    PTR(ADDR_SB1_PTR) = (u8 *)(ADDR_SB1 + offset);
    PTR(ADDR_SB2_PTR) = (u8 *)(ADDR_SB2 + offset);
    /* src/new_game.c: name, trainer id, SetDefaultOptions */
    u8 *b2 = sb2();
    memcpy(b2 + SB2_PLAYER_NAME, player_name, 8);
    b2[SB2_GENDER] = 0;
    wr32(b2 + SB2_TRAINER_ID, 0x1A2B3039u);
    b2[SB2_BUTTON_MODE] = BUTTON_MODE_HELP;
    wr16(b2 + SB2_OPTIONS, TEXT_SPEED_MID); /* frame 0, sound mono, battle style SHIFT (0) */
#if defined(SB1_MONEY)
    money_set(NEW_GAME_MONEY);
#endif
}

#if defined(SB1_MONEY)
/* src/money.c GetMoney / SetMoney: the stored word is money ^ encryptionKey */
u32 money_get(void) { return rd32(sb1() + SB1_MONEY) ^ rd32(sb2() + SB2_ENC_KEY); }
void money_set(u32 value) { wr32(sb1() + SB1_MONEY, value ^ rd32(sb2() + SB2_ENC_KEY)); }
#endif

int flag_get(u16 id) { return (sb1()[SB1_FLAGS + (id >> 3)] >> (id & 7)) & 1; }
void flag_set(u16 id) { sb1()[SB1_FLAGS + (id >> 3)] |= (u8)(1 << (id & 7)); }
u16 var_get(u16 id) { return rd16(sb1() + SB1_VARS + 2 * (id - VARS_START)); }
void var_set(u16 id, u16 value) { wr16(sb1() + SB1_VARS + 2 * (id - VARS_START), value); }

static u16 bag_key(void) { return (u16)rd32(sb2() + SB2_ENC_KEY); }

u16 bag_count(u32 pocket, u32 slots, u16 item)
{
    u8 *p = sb1() + pocket;
    for (u32 i = 0; i < slots; i++)
        if (rd16(p + i * 4) == item)
            return rd16(p + i * 4 + 2) ^ bag_key();
    return 0;
}

/* src/item.c AddBagItem: an existing stack grows, else the first empty slot (itemId 0) */
void bag_add(u32 pocket, u32 slots, u16 item, u16 qty)
{
    u8 *p = sb1() + pocket;
    u32 empty = slots;
    for (u32 i = 0; i < slots; i++) {
        if (rd16(p + i * 4) == item) {
            wr16(p + i * 4 + 2, (u16)(((rd16(p + i * 4 + 2) ^ bag_key()) + qty) ^ bag_key()));
            return;
        }
        if (empty == slots && rd16(p + i * 4) == 0)
            empty = i;
    }
    if (empty < slots) {
        wr16(p + empty * 4, item);
        wr16(p + empty * 4 + 2, qty ^ bag_key());
    }
}

/* src/item.c RemoveBagItem: an emptied slot keeps its place with itemId ITEM_NONE */
void bag_remove(u32 pocket, u32 slots, u16 item, u16 qty)
{
    u8 *p = sb1() + pocket;
    for (u32 i = 0; i < slots; i++)
        if (rd16(p + i * 4) == item) {
            u16 have = rd16(p + i * 4 + 2) ^ bag_key();
            have = have > qty ? (u16)(have - qty) : 0;
            if (have == 0)
                wr16(p + i * 4, 0);
            wr16(p + i * 4 + 2, have ^ bag_key());
            return;
        }
}

/* ---- party records (include/pokemon.h struct Pokemon, src/pokemon.c) ---- */

/* GetSubstruct: for personality % 24, the position of substructure 0 (growth), 1 (attacks),
 * 2 (EVs), 3 (misc) among the four 12-byte slots */
static const u8 substruct_pos[24][4] = {
    {0, 1, 2, 3}, {0, 1, 3, 2}, {0, 2, 1, 3}, {0, 3, 1, 2}, {0, 2, 3, 1}, {0, 3, 2, 1},
    {1, 0, 2, 3}, {1, 0, 3, 2}, {2, 0, 1, 3}, {3, 0, 1, 2}, {2, 0, 3, 1}, {3, 0, 2, 1},
    {1, 2, 0, 3}, {1, 3, 0, 2}, {2, 1, 0, 3}, {3, 1, 0, 2}, {2, 3, 0, 1}, {3, 2, 0, 1},
    {1, 2, 3, 0}, {1, 3, 2, 0}, {2, 1, 3, 0}, {3, 1, 2, 0}, {2, 3, 1, 0}, {3, 2, 1, 0},
};

static u8 *mon(u8 slot) { return (u8 *)ADDR_PARTY + slot * MON_SIZE; }

u8 party_count(void) { return *(volatile u8 *)ADDR_PARTY_COUNT; }

#if defined(LAYOUT_EMERALD)
static const struct { u16 species; const char *name; } names[] = {
    {SPECIES_GRASS, "SPROUTLE"}, {SPECIES_FIRE, "EMBERPUP"}, {SPECIES_WATER, "DRIPLET"},
    {SPECIES_WILD1, "PIPWING"}, {SPECIES_WILD2, "NIBBLET"},
};

const char *species_name(u16 species)
{
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].species == species)
            return names[i].name;
    return "?";
}
#endif /* the FireRed build names its species from battle_data.inc (main.c) */

/* FireRed's character code of an upper-case ASCII letter, digit or space (charmap.txt) */
static u8 fr_char(char c)
{
    if (c >= 'A' && c <= 'Z')
        return (u8)(0xBB + (c - 'A'));
    if (c >= '0' && c <= '9')
        return (u8)(0xA1 + (c - '0'));
    return 0x00;
}

/* 16-bit word `index` (0..5) of substructure `type`, decrypted */
static u16 sub_word(u8 *m, int type, int index)
{
    u32 personality = rd32(m), key = personality ^ rd32(m + 4);
    u8 *w = m + 0x20 + substruct_pos[personality % 24][type] * 12 + (index & ~1) * 2;
    u32 word = rd32(w) ^ key;
    return (u16)((index & 1) ? word >> 16 : word);
}

u16 party_species(u8 slot) { return sub_word(mon(slot), 0, 0); }
u8 party_level(u8 slot) { return mon(slot)[0x54]; }
s16 party_hp(u8 slot) { return (s16)rd16(mon(slot) + 0x56); }
s16 party_max_hp(u8 slot) { return (s16)rd16(mon(slot) + 0x58); }
void party_set_hp(u8 slot, s16 hp) { wr16(mon(slot) + 0x56, (u16)(hp < 0 ? 0 : hp)); }

void party_heal(void)
{
    for (u8 i = 0; i < party_count(); i++)
        party_set_hp(i, party_max_hp(i));
}

/* SaveBlock2 pokedex owned/seen: bit (n-1)%8 of byte (n-1)/8 for national number n */
void dex_set(u16 species, int owned)
{
    u16 n = (u16)(species - 1);
    sb2()[SB2_DEX_SEEN + (n >> 3)] |= (u8)(1 << (n & 7));
    if (owned)
        sb2()[SB2_DEX_OWNED + (n >> 3)] |= (u8)(1 << (n & 7));
}

/* src/pokemon.c CreateMon / CalculateBoxMonChecksum / EncryptBoxMon, with our own simple stats */
int party_add(u16 species, u8 level)
{
    u8 n = party_count();
    if (n >= PARTY_SIZE)
        return -1;
    u8 *m = mon(n);
    memset(m, 0, MON_SIZE);
    u32 personality = ((u32)rand16() << 16) | rand16();
    u32 ot_id = rd32(sb2() + SB2_TRAINER_ID);
    wr32(m, personality);
    wr32(m + 4, ot_id);
    const char *name = species_name(species);
    int i = 0;
    for (; name[i] && i < 10; i++)
        m[8 + i] = fr_char(name[i]);
    for (; i < 10; i++)
        m[8 + i] = 0xFF;
    m[0x12] = LANGUAGE_ENGLISH;
    m[0x13] = 0x02; /* hasSpecies */
    memcpy(m + 0x14, sb2() + SB2_PLAYER_NAME, 7);
    u32 exp = (u32)level * level * level; /* medium-fast growth */
    u32 ivs = 10u | (10u << 5) | (10u << 10) | (10u << 15) | (10u << 20) | (10u << 25);
    u16 sub[4][6] = {
        {species, 0, (u16)exp, (u16)(exp >> 16), (u16)(70 << 8), 0}, /* growth: friendship 70 */
#if defined(LAYOUT_EMERALD)
        {33, 45, 0, 0, (u16)(35 | (40 << 8)), 0},                     /* TACKLE, GROWL; pp 35, 40 */
#else
        {1, 3, 0, 0, (u16)(35 | (30 << 8)), 0},                       /* BUMP, QUICK DASH (battle_data.inc) */
#endif
        {0, 0, 0, 0, 0, 0},                                           /* EVs, contest */
        {0, (u16)(level | (VERSION_GAME << 7) | (ITEM_POKE_BALL << 11)), (u16)ivs, (u16)(ivs >> 16), 0, 0},
    };
    u16 checksum = 0;
    for (int t = 0; t < 4; t++)
        for (int w = 0; w < 6; w++)
            checksum = (u16)(checksum + sub[t][w]);
    wr16(m + 0x1C, checksum);
    u32 key = personality ^ ot_id;
    const u8 *pos = substruct_pos[personality % 24];
    for (int t = 0; t < 4; t++)
        for (int w = 0; w < 6; w += 2)
            wr32(m + 0x20 + pos[t] * 12 + w * 2, ((u32)sub[t][w] | ((u32)sub[t][w + 1] << 16)) ^ key);
    s16 hp = (s16)(10 + 2 * level);
    m[0x54] = level;
    m[0x55] = 0xFF; /* no mail */
    wr16(m + 0x56, (u16)hp);
    wr16(m + 0x58, (u16)hp);
    for (int s = 0; s < 5; s++)
        wr16(m + 0x5A + 2 * s, (u16)(5 + level));
    *(volatile u8 *)ADDR_PARTY_COUNT = (u8)(n + 1);
    return n;
}

#if defined(LAYOUT_EMERALD)
/* a new level: experience (growth substructure, re-encrypted, checksum kept), level, HP, stats */
void party_set_level(u8 slot, u8 level)
{
    u8 *m = mon(slot);
    u32 personality = rd32(m), key = personality ^ rd32(m + 4);
    u8 *w = m + 0x20 + substruct_pos[personality % 24][0] * 12 + 4; /* growth: u32 experience at +4 */
    u32 old_exp = rd32(w) ^ key, exp = (u32)level * level * level;
    u16 checksum = rd16(m + 0x1C);
    checksum = (u16)(checksum - (u16)old_exp - (u16)(old_exp >> 16) + (u16)exp + (u16)(exp >> 16));
    wr32(w, exp ^ key);
    wr16(m + 0x1C, checksum);
    s16 hp = (s16)(10 + 2 * level);
    m[0x54] = level;
    wr16(m + 0x56, (u16)hp);
    wr16(m + 0x58, (u16)hp);
    for (int s = 0; s < 5; s++)
        wr16(m + 0x5A + 2 * s, (u16)(5 + level));
}
#endif

#if !defined(LAYOUT_EMERALD)
/* ---- the battle's view of a record: src/pokemon.c DecryptBoxMon + CalculateBoxMonChecksum ---- */

u8 *party_record(u8 slot) { return mon(slot); }

/* the four substructures decrypted into sub[type][word]; 1 when the checksum holds (else the game
 * shows a bad egg: src/pokemon.c GetBoxMonData sets isBadEgg on a checksum mismatch) */
int party_decrypt(u8 slot, u16 sub[4][6])
{
    u8 *m = mon(slot);
    u32 personality = rd32(m), key = personality ^ rd32(m + 4);
    const u8 *pos = substruct_pos[personality % 24];
    u16 checksum = 0;
    for (int t = 0; t < 4; t++)
        for (int w = 0; w < 6; w += 2) {
            u32 word = rd32(m + 0x20 + pos[t] * 12 + w * 2) ^ key;
            sub[t][w] = (u16)word;
            sub[t][w + 1] = (u16)(word >> 16);
            checksum = (u16)(checksum + sub[t][w] + sub[t][w + 1]);
        }
    return checksum == rd16(m + 0x1C);
}

/* src/pokemon.c EncryptBoxMon after CalculateBoxMonChecksum */
void party_encrypt(u8 slot, u16 sub[4][6])
{
    u8 *m = mon(slot);
    u32 personality = rd32(m), key = personality ^ rd32(m + 4);
    const u8 *pos = substruct_pos[personality % 24];
    u16 checksum = 0;
    for (int t = 0; t < 4; t++)
        for (int w = 0; w < 6; w += 2) {
            checksum = (u16)(checksum + sub[t][w] + sub[t][w + 1]);
            wr32(m + 0x20 + pos[t] * 12 + w * 2, ((u32)sub[t][w] | ((u32)sub[t][w + 1] << 16)) ^ key);
        }
    wr16(m + 0x1C, checksum);
}
#endif
