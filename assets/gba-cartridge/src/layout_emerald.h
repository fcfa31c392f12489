/* Emerald's RAM layout and ids, where the game keeps what the Emerald game definition reads.
 * Facts from pret/pokeemerald: pokeemerald.sym (symbols branch, stored commit 00dfb8bf),
 * include/global.h (stored commit 00519474), src/load_save.c, data/maps/map_groups.json,
 * include/constants/flags.h and vars.h as the Emerald definition cites them. RAM.md has the table. */
#ifndef LAYOUT_EMERALD_H
#define LAYOUT_EMERALD_H

#define LAYOUT_NAME "Emerald"
#define SAVEBLOCK_OFFSET_USES_TRAINER_ID 1 /* src/load_save.c: (trainer-id byte sum + Random()) & 0x7C */

/* ---- fixed addresses (pokeemerald.sym) ---- */
#define ADDR_SB1_PTR        0x03005D8Cu /* gSaveBlock1Ptr */
#define ADDR_SB2_PTR        0x03005D90u /* gSaveBlock2Ptr */
#define ADDR_SB1            0x02025A00u /* gSaveblock1 (size 0x3D88) */
#define ADDR_SB2            0x02024A54u /* gSaveblock2 (size 0xF2C) */
#define SB1_SIZE            0x3D88u
#define SB2_SIZE            0x0F2Cu
#define SAVEBLOCK_MOVE_RANGE 128u
#define ADDR_PARTY_COUNT    0x020244E9u /* gPlayerPartyCount */
#define ADDR_PARTY          0x020244ECu /* gPlayerParty */
#define ADDR_MAIN           0x030022C0u /* gMain (size 0x43C) */
#define MAIN_BITS_OFFSET    0x439u      /* include/main.h: oamLoadDisabled:1, inBattle:1 */
#define MAIN_INBATTLE_BIT   0x02u
#define ADDR_BATTLE_OUTCOME 0x0202433Au /* gBattleOutcome */
#define ADDR_BATTLE_TYPE    0x02022FECu /* gBattleTypeFlags */
#define ADDR_STRING_VAR4    0x02021FC4u /* gStringVar4 */
#define ADDR_MSGBOX_TYPE    0x020375BCu /* sFieldMessageBoxMode (src/field_message_box.c) */
#define ADDR_DISPLAYED_BATTLE 0x02022E2Cu /* gDisplayedStringBattle */
#define ADDR_IWRAM_FREE_END 0x030022C0u /* our .data/.bss must end below gMain */

/* ---- struct SaveBlock1 offsets (include/global.h) ---- */
#define SB1_POS_X       0x0000u
#define SB1_POS_Y       0x0002u
#define SB1_MAP_GROUP   0x0004u
#define SB1_MAP_NUM     0x0005u
#define SB1_WARP_ID     0x0006u
#define SB1_PARTY_COUNT 0x0234u
#define SB1_POCKET_ITEMS 0x0560u /* BAG_ITEMS_COUNT 30 */
#define SB1_POCKET_KEY  0x05D8u  /* BAG_KEYITEMS_COUNT 30 */
#define SB1_POCKET_BALLS 0x0650u /* BAG_POKEBALLS_COUNT 16 */
#define SB1_FLAGS       0x1270u  /* u8 flags[300] */
#define SB1_VARS        0x139Cu  /* u16 vars[256] */
#define POCKET_ITEMS_COUNT 30
#define POCKET_KEY_COUNT   30
#define POCKET_BALLS_COUNT 16
#define VARS_START 0x4000u

/* ---- struct SaveBlock2 offsets (include/global.h) ---- */
#define SB2_PLAYER_NAME 0x000u
#define SB2_GENDER      0x008u
#define SB2_TRAINER_ID  0x00Au
#define SB2_BUTTON_MODE 0x013u
#define SB2_OPTIONS     0x014u
#define SB2_DEX_OWNED   0x028u
#define SB2_DEX_SEEN    0x05Cu
#define SB2_ENC_KEY     0x0ACu /* u32 encryptionKey */
#define OPT_TEXT_MASK   0x0007u
#define OPT_STYLE_BIT   0x0200u
#define TEXT_SPEED_MID  1
#define BUTTON_MODE_HELP 0 /* OPTIONS_BUTTON_MODE_NORMAL */

/* ---- flags and vars the shared code (the house, the options) names: Emerald's equivalents ---- */
#define FLAG_SYS_POKEMON_GET        0x860 /* SYSTEM_FLAGS + 0 */
#define FLAG_SYS_POKEDEX_GET        0x861 /* SYSTEM_FLAGS + 1 */
#define FLAG_WORLD_MAP_TOWN         0x86F /* FLAG_VISITED_LITTLEROOT_TOWN */
#define FLAG_WORLD_MAP_CITY         0x870 /* FLAG_VISITED_OLDALE_TOWN (set by the course) */
#define FLAG_BEAT_RIVAL_IN_OAKS_LAB 0x82  /* FLAG_DEFEATED_RIVAL_ROUTE103 */
#define VAR_STARTER_MON  0x4023 /* VAR_STARTER_MON */
#define VAR_OAK_SCENE    0x4092 /* VAR_LITTLEROOT_INTRO_STATE */
#define VAR_LAB_SCENE    0x4084 /* VAR_BIRCH_LAB_STATE */
#define VAR_MART_SCENE   0x4060 /* VAR_ROUTE101_STATE */

#define ITEM_POKE_BALL   4
#define ITEM_PARCEL      0   /* no parcel in the Emerald course */

/* ---- maps: (mapGroup, mapNum) (data/maps/map_groups.json order) ---- */
#define MAPID_HOUSE_2F   1, 1  /* LittlerootTown_BrendansHouse_2F */
#define MAPID_HOUSE_1F   1, 0  /* LittlerootTown_BrendansHouse_1F */
#define MAPID_TOWN       0, 9  /* LittlerootTown */
#define MAPID_LAB        1, 4  /* LittlerootTown_ProfessorBirchsLab */
#define MAPID_ROUTE      0, 16 /* Route101 */
#define MAPID_CITY       0, 10 /* OldaleTown */
#define MAPID_SHOP       2, 4  /* OldaleTown_Mart */

#define B_OUTCOME_WON    1
#define B_OUTCOME_LOST   2
#define B_OUTCOME_RAN    4
#define B_OUTCOME_CAUGHT 7
#define BATTLE_TYPE_TRAINER (1u << 3)
#define MSGBOX_HIDDEN 0
#define MSGBOX_NORMAL 2

#define MON_SIZE 100
#define VERSION_GAME 3 /* VERSION_EMERALD */
#define LANGUAGE_ENGLISH 2
/* Kanto species, whose internal ids equal their national numbers in Gen 3 */
#define SPECIES_GRASS 1
#define SPECIES_FIRE  4
#define SPECIES_WATER 7
#define SPECIES_WILD1 16
#define SPECIES_WILD2 19

#endif
