@ Parcel Quest Advance start-up: the cartridge header, init (stacks, .data, .bss, IRQ) and the IRQ handler.
    .section .header, "ax"
    .arm
    .global _start
_start:
    b       init                            @ 0x00: branch over the header
    @ 0x04-0x9F: where cartridges carry the boot logo. Ours is our own byte pattern (mGBA's built-in
    @ BIOS does not check it); no commercial bitmap.
    .rept 39
    .byte 0x50, 0x51, 0x41, 0x21            @ "PQA!" x 39 = 156 bytes
    .endr
    .ascii  "PARCELQUESTA"                  @ 0xA0 title (12)
    .ascii  "OPQE"                          @ 0xAC game code
    .ascii  "OW"                            @ 0xB0 maker
    .byte   0x96                            @ 0xB2 fixed
    .byte   0x00                            @ 0xB3 unit code
    .byte   0x00                            @ 0xB4 device type
    .byte   0, 0, 0, 0, 0, 0, 0             @ 0xB5 reserved
    .byte   0x00                            @ 0xBC version
    .byte   0x00                            @ 0xBD complement: build.sh writes it
    .byte   0, 0                            @ 0xBE reserved

init:
    mov     r0, #0x12                       @ IRQ mode
    msr     cpsr_c, r0
    ldr     sp, =0x03007FA0
    mov     r0, #0x1F                       @ system mode
    msr     cpsr_c, r0
    ldr     sp, =0x03007F00
    @ copy .data from ROM to IWRAM, zero .bss
    ldr     r0, =__data_lma
    ldr     r1, =__data_start
    ldr     r2, =__data_end
1:  cmp     r1, r2
    ldrlo   r3, [r0], #4
    strlo   r3, [r1], #4
    blo     1b
    ldr     r1, =__bss_start
    ldr     r2, =__bss_end
    mov     r3, #0
2:  cmp     r1, r2
    strlo   r3, [r1], #4
    blo     2b
    @ the BIOS calls the handler at 0x03007FFC on an interrupt
    ldr     r0, =0x03007FFC
    ldr     r1, =irq_handler
    str     r1, [r0]
    ldr     r0, =main
    mov     lr, pc
    bx      r0
3:  b       3b

@ acknowledge every pending interrupt and tell VBlankIntrWait (BIOS_IF at 0x03007FF8)
    .arm
irq_handler:
    mov     r0, #0x04000000
    add     r0, r0, #0x200
    ldrh    r1, [r0, #2]                    @ REG_IF
    strh    r1, [r0, #2]
    ldr     r2, =0x03007FF8
    ldrh    r3, [r2]
    orr     r3, r3, r1
    strh    r3, [r2]
    bx      lr
    .pool
