/* Game Boy Advance hardware: types and the registers this game uses (GBATEK). */
#ifndef GBA_H
#define GBA_H

typedef unsigned char u8;
typedef signed char s8;
typedef unsigned short u16;
typedef signed short s16;
typedef unsigned int u32;
typedef signed int s32;

#define REG16(a) (*(volatile u16 *)(a))
#define REG32(a) (*(volatile u32 *)(a))

#define REG_DISPCNT  REG16(0x04000000)
#define REG_DISPSTAT REG16(0x04000004)
#define REG_BG0CNT   REG16(0x04000008)
#define REG_BG1CNT   REG16(0x0400000A)
#define REG_BG0HOFS  REG16(0x04000010)
#define REG_BG0VOFS  REG16(0x04000012)
#define REG_KEYINPUT REG16(0x04000130)
#define REG_IE       REG16(0x04000200)
#define REG_IF       REG16(0x04000202)
#define REG_IME      REG16(0x04000208)

#define PAL_BG   ((volatile u16 *)0x05000000)
#define VRAM     ((volatile u16 *)0x06000000)
#define SCREENBLOCK(n) ((volatile u16 *)(0x06000000 + (n) * 0x800))

/* BIOS interrupt flags the IRQ handler (crt0.s) ORs in, checked by VBlankIntrWait */
#define BIOS_IF REG16(0x03007FF8)

#define KEY_A      0x0001
#define KEY_B      0x0002
#define KEY_SELECT 0x0004
#define KEY_START  0x0008
#define KEY_RIGHT  0x0010
#define KEY_LEFT   0x0020
#define KEY_UP     0x0040
#define KEY_DOWN   0x0080

#endif
