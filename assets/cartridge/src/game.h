/* Parcel Quest - shared definitions. */
#ifndef PQ_GAME_H
#define PQ_GAME_H
#include <stdint.h>
#include "data.h"

#define REG(a) (*(volatile uint8_t *)(a))
#define rP1   REG(0xFF00)
#define rIF   REG(0xFF0F)
#define rLCDC REG(0xFF40)
#define rSCY  REG(0xFF42)
#define rSCX  REG(0xFF43)
#define rLY   REG(0xFF44)
#define rBGP  REG(0xFF47)
#define rIE   REG(0xFFFF)

/* Hidden state at fixed WRAM addresses (documented in RAM.md; the harness reads them). */
#define G_MAGIC      REG(0xD000)
#define G_MAP        REG(0xD001)
#define G_X          REG(0xD002)
#define G_Y          REG(0xD003)
#define G_FACING     REG(0xD004)
#define G_FLAGS0     REG(0xD005)
#define G_FLAGS1     REG(0xD006)
#define G_BAG_COUNT  REG(0xD007)
#define G_BAG        ((volatile uint8_t *)0xD008)
#define G_PARTY_COUNT REG(0xD010)
#define G_PARTY      ((volatile uint8_t *)0xD011)
#define G_BATTLE     REG(0xD014)
#define G_PLAYER_HP  REG(0xD015)
#define G_ENEMY_HP   REG(0xD016)
#define G_TEXT       REG(0xD017)
#define G_MENU       REG(0xD018)
#define G_CURSOR     REG(0xD019)
#define G_STEPS      (*(volatile uint16_t *)0xD01A)
#define G_RNG        REG(0xD020)
#define G_RIVAL      REG(0xD021)
#define G_BALL       REG(0xD022) /* species of the ball being looked at */
#define G_BPHASE     REG(0xD023) /* battle phase (see battle code) */

#define MAGIC_READY 0x4F

/* flags0 */
#define F0_LEFT_HOUSE   0x01
#define F0_PROF_STOPPED 0x02
#define F0_GOT_STARTER  0x04
#define F0_BATTLE_DONE  0x08
#define F0_REACHED_MAPLE 0x10
#define F0_GOT_PARCEL   0x20
#define F0_DELIVERED    0x40
#define F0_GOT_DEX      0x80
/* flags1 */
#define F1_RIVAL_CHOSE  0x01
#define F1_BATTLE_WON   0x02
#define F1_RIVAL_LEFT   0x04

/* items, species */
#define ITEM_PARCEL 1
#define ITEM_DEX    2
#define SP_SPROUTLE 1
#define SP_EMBERPUP 2
#define SP_DRIPLET  3

/* menus */
#define MENU_NONE   0
#define MENU_START  1
#define MENU_BAG    2
#define MENU_YESNO  3
#define MENU_FIGHT  5

/* facing */
#define FACE_DOWN  0
#define FACE_UP    1
#define FACE_LEFT  2
#define FACE_RIGHT 3

/* keys: buttons in the low nibble, d-pad in the high nibble */
#define K_A      0x01
#define K_B      0x02
#define K_SELECT 0x04
#define K_START  0x08
#define K_RIGHT  0x10
#define K_LEFT   0x20
#define K_UP     0x40
#define K_DOWN   0x80

/* text placeholders (octal escapes so they never swallow the next character) */
#define P_ME     "\001"   /* player's creature */
#define P_RIVAL  "\002"   /* rival's creature */
#define P_BALL   "\003"   /* species in the ball being looked at */
#define P_TYPE   "\004"   /* its type */
#define P_MYMOVE "\005"
#define P_RVMOVE "\006"

void flush_rows(uint8_t force);

#endif
