#!/bin/sh
# Build Parcel Quest Advance (parcel-quest-advance.gba) with Debian's gcc-arm-none-eabi.
# Usage: build.sh [OUTDIR]   (default: the directory of this script)
# LAYOUT=emerald builds the Emerald layout (src/layout_emerald.h, the course of course_emerald.inc)
# as parcel-quest-advance-emerald.gba.
# The output is byte-for-byte reproducible: fixed flags, no debug info, no timestamps or paths
# (sources are compiled in a temporary copy under a mapped prefix).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
NAME=parcel-quest-advance
DEFS=""
OBJS="crt0.o main.o ram.o gfx.o"
IWRAM_END=0x030030F0  # gMain (layout_firered.h ADDR_IWRAM_FREE_END): our .bss must end below it
case "${LAYOUT:-firered}" in
    firered) OBJS="$OBJS fieldmap.o" ;;
    emerald) DEFS="-DLAYOUT_EMERALD"; NAME=parcel-quest-advance-emerald; OBJS="$OBJS course_gfx.o"
             IWRAM_END=0x030022C0 ;;
    *) echo "LAYOUT must be firered or emerald" >&2; exit 2 ;;
esac
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp "$HERE"/src/*.c "$HERE"/src/*.h "$HERE"/src/*.inc "$HERE"/src/crt0.s "$HERE"/src/gba.ld "$WORK"/
cd "$WORK"
CFLAGS="-mcpu=arm7tdmi -mthumb -mthumb-interwork -O2 -std=c11 -ffreestanding -fno-builtin -nostdlib
 -fno-common -ffunction-sections -Wall -Wextra -Werror -Wno-unused-parameter -ffile-prefix-map=$WORK=. $DEFS"
arm-none-eabi-gcc $CFLAGS -c crt0.s -o crt0.o
for o in $OBJS; do
    [ "$o" = crt0.o ] || arm-none-eabi-gcc $CFLAGS -c "${o%.o}.c" -o "$o"
done
arm-none-eabi-gcc $CFLAGS -T gba.ld -Wl,--gc-sections -Wl,--build-id=none $OBJS -lgcc -o game.elf
BSS_END=$(arm-none-eabi-nm game.elf | awk '$3 == "__bss_end" {print $1}')
[ $((0x$BSS_END)) -le $((IWRAM_END)) ] || { echo "IWRAM .bss ends at 0x$BSS_END, past $IWRAM_END" >&2; exit 1; }
arm-none-eabi-objcopy -O binary game.elf game.gba
# header complement at 0xBD: -(0x19 + sum of bytes 0xA0..0xBC) mod 256 (gbafix's HeaderComplement)
SUM=$(od -An -tu1 -j160 -N29 game.gba | tr -s ' \n' '\n' | awk 'NF {s += $1} END {print s}')
COMP=$(( (256 - (SUM + 0x19) % 256) % 256 ))
printf "$(printf '\\%03o' "$COMP")" | dd of=game.gba bs=1 seek=189 conv=notrunc status=none
# pad to a multiple of 1 KiB
SIZE=$(wc -c < game.gba)
truncate -s $(( (SIZE + 1023) / 1024 * 1024 )) game.gba
cp game.gba "$OUT/$NAME.gba"
echo "built $OUT/$NAME.gba"
