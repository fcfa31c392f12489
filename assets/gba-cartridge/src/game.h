/* Parcel Quest Advance: declarations shared by main.c (the game) and ram.c (the RAM it keeps
 * where the layout header says). */
#ifndef GAME_H
#define GAME_H
#include "gba.h"
#include "layout.h"

#define PARTY_SIZE 6

/* ram.c: random numbers (FireRed's LCG, src/random.c; advanced only by game events, so the game
 * is a function of the button sequence, not of frame timing) */
u16 rand16(void);

/* ram.c: the save blocks, reached only through their pointers */
u8 *sb1(void);
u8 *sb2(void);
void ram_power_on(void);
void saveblocks_move(void);

int flag_get(u16 id);
void flag_set(u16 id);
u16 var_get(u16 id);
void var_set(u16 id, u16 value);

/* bag pockets: quantities XORed with the low 16 bits of SaveBlock2.encryptionKey */
u16 bag_count(u32 pocket_offset, u32 slots, u16 item);
void bag_add(u32 pocket_offset, u32 slots, u16 item, u16 qty);
void bag_remove(u32 pocket_offset, u32 slots, u16 item, u16 qty);

/* party: gPlayerParty records (struct Pokemon) */
u8 party_count(void);
int party_add(u16 species, u8 level);
u16 party_species(u8 slot);
u8 party_level(u8 slot);
s16 party_hp(u8 slot);
s16 party_max_hp(u8 slot);
void party_set_hp(u8 slot, s16 hp);
void party_heal(void);
#if defined(SB1_MONEY)
u32 money_get(void);
void money_set(u32 value);
#endif
#if defined(LAYOUT_EMERALD)
void party_set_level(u8 slot, u8 level);
#endif
void dex_set(u16 species, int owned);
u8 *party_record(u8 slot);
int party_decrypt(u8 slot, u16 sub[4][6]);
void party_encrypt(u8 slot, u16 sub[4][6]);

/* fieldmap.c (FireRed build): the current map's grid and the people on it, kept where FireRed keeps
 * them (VMap, gBackupMapData, gObjectEvents); nothing in a build whose layout has no map grid */
#if defined(ADDR_VMAP)
void fieldmap_load(const u8 *cells);
void fieldmap_objects_begin(u8 px, u8 py, u8 facing);
void fieldmap_object_add(u8 x, u8 y, u16 obj);
void fieldmap_objects_end(void);
#else
#define fieldmap_load(cells) ((void)0)
#define fieldmap_objects_begin(px, py, facing) ((void)0)
#define fieldmap_object_add(x, y, obj) ((void)0)
#define fieldmap_objects_end() ((void)0)
#endif

/* names of our creatures by species id, as ASCII upper case */
const char *species_name(u16 species);

void *memcpy(void *dst, const void *src, unsigned n);
void *memset(void *dst, int c, unsigned n);

#endif
