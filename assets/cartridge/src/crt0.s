;; Parcel Quest start-up code, interrupt vector and VRAM row copier (sdasgb syntax).
;; Written for this project; SDCC calling convention __sdcccall(1).

        .globl  _main
        .globl  _shadow
        .globl  _dirty
        .globl  _vblank_flag

        .area   _HEADER (ABS)

        .org    0x00
        ret
        .org    0x38
        ;; rst 0x38 (opcode 0xFF, unprogrammed memory): stop here for good
1$:     di
        halt
        jr      1$

        ;; VBlank interrupt: count frames (u32 at 0xD01C) and raise the flag
        .org    0x40
        jp      vblank_isr
        .org    0x48
        reti
        .org    0x50
        reti
        .org    0x58
        reti
        .org    0x60
        reti

        .org    0x100
        nop
        jp      init

        ;; Header logo area: the first four bytes are what emulator loaders look for;
        ;; the rest is our own pattern (a row of parcels), not a copy of any logo.
        .org    0x104
        .db     0xCE, 0xED, 0x66, 0x66
        .db     0x18, 0x3C, 0x7E, 0xFF, 0xFF, 0x7E, 0x3C, 0x18
        .db     0x18, 0x3C, 0x7E, 0xFF, 0xFF, 0x7E, 0x3C, 0x18
        .db     0x18, 0x3C, 0x7E, 0xFF, 0xFF, 0x7E, 0x3C, 0x18
        .db     0x18, 0x3C, 0x7E, 0xFF, 0xFF, 0x7E, 0x3C, 0x18
        .db     0x18, 0x3C, 0x7E, 0xFF, 0xFF, 0x7E, 0x3C, 0x18
        .db     0x50, 0x51, 0x50, 0x51

        ;; Segment order for the linker
        .area   _HOME
        .area   _CODE
        .area   _INITIALIZER
        .area   _GSINIT
        .area   _GSFINAL
        .area   _DATA
        .area   _INITIALIZED
        .area   _BSEG
        .area   _BSS
        .area   _HEAP

        .area   _CODE
init:
        di
        ld      sp, #0xE000         ; stack grows down from the top of WRAM
        ;; clear all of WRAM 0xC000-0xDFFF (game state at 0xD000-0xD0FF included)
        ld      hl, #0xC000
        ld      bc, #0x2000
        xor     a
2$:     ld      (hl+), a
        dec     bc
        ld      a, b
        or      c
        ld      a, #0
        jr      nz, 2$
        ;; clear HRAM 0xFF80-0xFFFE
        ld      hl, #0xFF80
        ld      b, #0x7F
3$:     ld      (hl+), a
        dec     b
        jr      nz, 3$
        ;; copy initialised globals
        ld      de, #s__INITIALIZED
        ld      hl, #s__INITIALIZER
        ld      bc, #l__INITIALIZER
4$:     ld      a, b
        or      c
        jr      z, 5$
        ld      a, (hl+)
        ld      (de), a
        inc     de
        dec     bc
        jr      4$
5$:     call    gsinit
        call    _main
6$:     halt
        nop
        jr      6$

vblank_isr:
        push    af
        push    hl
        ld      hl, #0xD01C
        inc     (hl)
        jr      nz, 7$
        inc     hl
        inc     (hl)
        jr      nz, 7$
        inc     hl
        inc     (hl)
        jr      nz, 7$
        inc     hl
        inc     (hl)
7$:     ld      a, #1
        ld      (_vblank_flag), a
        pop     hl
        pop     af
        reti

;; void flush_rows(uint8_t force)
;; Copy dirty rows of the 20x18 shadow screen to the BG map at 0x9800.
;; force == 0: only while LY is in 144..150 (safe VBlank time); force != 0: LCD is off, copy all.
_flush_rows::
        ld      d, a                ; d = force
        ld      c, #0               ; c = row
        ld      hl, #_dirty
8$:     ld      a, (hl)
        or      a
        jr      z, 9$
        ld      a, d
        or      a
        jr      nz, 10$
        ldh     a, (0x44)           ; LY
        cp      #144
        ret     c
        cp      #151
        ret     nc
10$:    xor     a
        ld      (hl), a             ; row no longer dirty
        push    hl
        push    de
        push    bc
        ;; de = 0x9800 + row*32
        ld      a, c
        and     #7
        swap    a
        add     a, a
        ld      e, a
        ld      a, c
        srl     a
        srl     a
        srl     a
        add     a, #0x98
        ld      d, a
        ;; hl = _shadow + row*20
        ld      l, c
        ld      h, #0
        add     hl, hl
        add     hl, hl
        ld      b, h
        ld      c, l
        add     hl, hl
        add     hl, hl
        add     hl, bc
        ld      bc, #_shadow
        add     hl, bc
        .rept   20
        ld      a, (hl+)
        ld      (de), a
        inc     e
        .endm
        pop     bc
        pop     de
        pop     hl
9$:     inc     hl
        inc     c
        ld      a, c
        cp      #18
        jr      nz, 8$
        ret

        .area   _GSINIT
gsinit::
        .area   _GSFINAL
        ret
