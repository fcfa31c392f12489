/* FireRed's RAM layout and ids, where the game keeps what the FireRed game definition reads.
 * Facts from pret/pokefirered (master df4449a27; symbols branch pokefirered.sym), cited per line.
 * RAM.md has the same table with the definition's side by side. */
#ifndef LAYOUT_FIRERED_H
#define LAYOUT_FIRERED_H

#define LAYOUT_NAME "FireRed"

/* ---- fixed addresses (symbols branch pokefirered.sym) ---- */
#define ADDR_SB1_PTR        0x03005008u /* gSaveBlock1Ptr */
#define ADDR_SB2_PTR        0x0300500Cu /* gSaveBlock2Ptr */
#define ADDR_SB1            0x0202552Cu /* gSaveBlock1 (size 0x3D68) */
#define ADDR_SB2            0x02024588u /* gSaveBlock2 (size 0xF24) */
#define SB1_SIZE            0x3D68u
#define SB2_SIZE            0x0F24u
#define SAVEBLOCK_MOVE_RANGE 128u       /* src/load_save.c */
#define ADDR_PARTY_COUNT    0x02024029u /* gPlayerPartyCount */
#define ADDR_PARTY          0x02024284u /* gPlayerParty, 6 x struct Pokemon (100 bytes) */
#define ADDR_MAIN           0x030030F0u /* gMain (size 0x43C) */
#define MAIN_BITS_OFFSET    0x439u      /* include/main.h: oamLoadDisabled:1, inBattle:1 */
#define MAIN_INBATTLE_BIT   0x02u
#define ADDR_BATTLE_OUTCOME 0x02023E8Au /* gBattleOutcome */
#define ADDR_BATTLE_TYPE    0x02022B4Cu /* gBattleTypeFlags (u32) */
#define ADDR_STRING_VAR4    0x02021D18u /* gStringVar4, u8[1000] */
#define ADDR_MSGBOX_TYPE    0x0203709Cu /* sMessageBoxType (src/field_message_box.c) */
#define ADDR_DISPLAYED_BATTLE 0x0202298Cu /* gDisplayedStringBattle, u8[300] */
#define ADDR_IWRAM_FREE_END 0x030030F0u /* our .data/.bss must end below gMain */
/* the battle engine's RAM (symbols branch pokefirered.sym; struct BattlePokemon in include/pokemon.h) */
#define ADDR_BATTLE_MONS    0x02023BE4u /* gBattleMons, 4 x struct BattlePokemon (0x58) */
#define ADDR_BATTLER_PARTY_INDEXES 0x02023BCEu /* gBattlerPartyIndexes, u16 per battler */
#define ADDR_BATTLE_COMM    0x02023E82u /* gBattleCommunication[0]: src/battle_main.c HandleTurnActionSelectionState */
#define ADDR_EXEC_FLAGS     0x02023BC8u /* gBattleControllerExecFlags (u32), bit 0 battler 0 */
#define ADDR_ACTION_CURSOR  0x02023FF8u /* gActionSelectionCursor[0] */
#define ADDR_MOVE_CURSOR    0x02023FFCu /* gMoveSelectionCursor[0] */
#define ADDR_PARTY_ORDER    0x0203B0DCu /* gBattlePartyCurrentOrder, u8[3], party ids in nibbles */
#define BMON_SIZE 0x58
#define STATE_WAIT_ACTION_CHOSEN 1      /* src/battle_main.c, the anonymous enum */
#define STATE_WAIT_ACTION_CASE_CHOSEN 2
#define TRAINER_FLAGS_START 0x500      /* include/constants/flags.h */
#define DEFAULT_STAT_STAGE 6           /* include/constants/pokemon.h */

/* ---- struct SaveBlock1 offsets (include/global.h) ---- */
#define SB1_POS_X       0x0000u /* struct Coords16 pos */
#define SB1_POS_Y       0x0002u
#define SB1_MAP_GROUP   0x0004u /* struct WarpData location: s8 mapGroup, s8 mapNum, s8 warpId, s16 x, y */
#define SB1_MAP_NUM     0x0005u
#define SB1_WARP_ID     0x0006u
#define SB1_PARTY_COUNT 0x0034u /* the copy written at save time */
#define SB1_MONEY       0x0290u /* u32 money, XORed with SaveBlock2.encryptionKey (src/money.c GetMoney) */
#define SB1_POCKET_ITEMS 0x0310u /* 42 x struct ItemSlot {u16 itemId, quantity} */
#define SB1_POCKET_KEY  0x03B8u  /* 30 slots */
#define SB1_POCKET_BALLS 0x0430u /* 13 slots */
#define SB1_FLAGS       0x0EE0u  /* u8 flags[NUM_FLAG_BYTES] */
#define SB1_VARS        0x1000u  /* u16 vars[VARS_COUNT], VARS_START 0x4000 */
#define POCKET_ITEMS_COUNT 42    /* include/constants/global.h BAG_ITEMS_COUNT */
#define POCKET_KEY_COUNT   30    /* BAG_KEYITEMS_COUNT */
#define POCKET_BALLS_COUNT 13    /* BAG_POKEBALLS_COUNT */
#define VARS_START 0x4000u

/* ---- struct SaveBlock2 offsets (include/global.h) ---- */
#define SB2_PLAYER_NAME 0x000u /* u8[8] */
#define SB2_GENDER      0x008u
#define SB2_TRAINER_ID  0x00Au /* u8[4] */
#define SB2_BUTTON_MODE 0x013u
#define SB2_OPTIONS     0x014u /* u16: textSpeed:3, frameType:5, sound:1, battleStyle:1, sceneOff:1, zoom:1 */
#define SB2_DEX_OWNED   0x028u /* pokedex (0x18) + owned (0x10), DEX_FLAGS_NO 52 */
#define SB2_DEX_SEEN    0x05Cu /* pokedex (0x18) + seen (0x44) */
#define SB2_ENC_KEY     0xF20u /* u32 encryptionKey */
#define OPT_TEXT_MASK   0x0007u
#define OPT_STYLE_BIT   0x0200u
#define TEXT_SPEED_MID  1      /* include/constants/global.h OPTIONS_TEXT_SPEED_MID; new_game.c default */
#define BUTTON_MODE_HELP 0     /* OPTIONS_BUTTON_MODE_HELP */

/* ---- flags (include/constants/flags.h; SYS_FLAGS 0x800) ---- */
#define FLAG_BEAT_RIVAL_IN_OAKS_LAB 0x258
#define FLAG_SYS_POKEMON_GET        0x828
#define FLAG_SYS_POKEDEX_GET        0x829
#define FLAG_WORLD_MAP_TOWN         0x890 /* FLAG_WORLD_MAP_PALLET_TOWN */
#define FLAG_WORLD_MAP_CITY         0x891 /* FLAG_WORLD_MAP_VIRIDIAN_CITY */

/* ---- vars (include/constants/vars.h) ---- */
#define VAR_STARTER_MON  0x4031 /* 0 Bulbasaur (grass), 1 Squirtle (water), 2 Charmander (fire) */
#define VAR_OAK_SCENE    0x4050 /* VAR_MAP_SCENE_PALLET_TOWN_OAK */
#define VAR_LAB_SCENE    0x4055 /* VAR_MAP_SCENE_PALLET_TOWN_PROFESSOR_OAKS_LAB */
#define VAR_MART_SCENE   0x4057 /* VAR_MAP_SCENE_VIRIDIAN_CITY_MART */
#define VAR_RESTS        0x40F0 /* our cartridge's own: heals at MOM that restored HP (no FireRed meaning used) */
#define VAR_PURCHASES    0x40F1 /* our cartridge's own: items bought at the shop (no FireRed meaning used) */
#define VAR_SWITCHED_LEAD 0x40F2 /* our cartridge's own: the lead's species after the party menu's last SWITCH, 0 before any */

/* ---- items (include/constants/items.h) ---- */
#define ITEM_POKE_BALL   4
#define BALL_PRICE       200  /* src/data/items.json ITEM_POKE_BALL price */
#define NEW_GAME_MONEY   3000 /* src/new_game.c NewGameInitData SetMoney(&gSaveBlock1Ptr->money, 3000) */
#define ITEM_PARCEL      349 /* ITEM_OAKS_PARCEL */

/* ---- maps: (mapGroup, mapNum) of the real maps (data/maps/map_groups.json order) ---- */
#define MAPID_HOUSE_2F   4, 1 /* PalletTown_PlayersHouse_2F */
#define MAPID_HOUSE_1F   4, 0 /* PalletTown_PlayersHouse_1F */
#define MAPID_TOWN       3, 0 /* PalletTown */
#define MAPID_LAB        4, 3 /* PalletTown_ProfessorOaksLab */
#define MAPID_ROUTE      3, 19 /* Route1 */
#define MAPID_CITY       3, 1 /* ViridianCity */
#define MAPID_SHOP       5, 3 /* ViridianCity_Mart */

/* ---- battle (include/constants/battle.h) ---- */
#define B_OUTCOME_WON    1
#define B_OUTCOME_LOST   2
#define B_OUTCOME_RAN    4
#define B_OUTCOME_CAUGHT 7
#define BATTLE_TYPE_TRAINER (1u << 3)
#define MSGBOX_HIDDEN 0 /* include/field_message_box.h FIELD_MESSAGE_BOX_HIDDEN */
#define MSGBOX_NORMAL 2 /* FIELD_MESSAGE_BOX_NORMAL */

/* ---- struct Pokemon (include/pokemon.h) ---- */
#define MON_SIZE 100
#define VERSION_GAME 4      /* VERSION_FIRE_RED (include/constants/global.h) */
#define LANGUAGE_ENGLISH 2
/* national dex numbers used as species ids (SPECIES_ = national number for 1..251) */
#define SPECIES_GRASS 1
#define SPECIES_FIRE  4
#define SPECIES_WATER 7
#define SPECIES_WILD1 16
#define SPECIES_WILD2 19

#endif
