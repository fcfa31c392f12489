#!/bin/sh
# Build Parcel Quest (parcel-quest.gb) with SDCC's sm83 port.
# Usage: build.sh [OUTDIR]   (default: the directory of this script)
# The output is byte-for-byte reproducible: no timestamps or paths end up in the ROM.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp "$HERE"/src/*.c "$HERE"/src/*.h "$HERE"/src/crt0.s "$HERE"/src/tables.s "$WORK"/
cd "$WORK"
sdasgb -plosgff -o crt0.rel crt0.s
# the data tables sit at a fixed address (0x4000, TABLES.md): variants rewrite them in place
sdasgb -plosgff -o tables.rel tables.s
for f in main data; do
    sdcc -msm83 --no-peep --std-c99 -c "$f.c" -o "$f.rel"
done
sdcc -msm83 --no-peep --no-std-crt0 --code-loc 0x0150 --data-loc 0xC100 \
    -o game.ihx crt0.rel main.rel data.rel tables.rel
# -yN: keep our own header logo bytes (crt0.s); 0x146 (SGB flag) and 0x14C (version) = 0
# the code (and its initialisers, which the linker places last) must end below the tables at 0x4000
CODE_END=$(awk '$1=="_GSFINAL" {print $2}' game.map)
[ $((0x$CODE_END)) -lt $((0x4000)) ] || { echo "code runs into the tables (ends at 0x$CODE_END)" >&2; exit 1; }
makebin -Z -yN -yn "PARCELQUEST" -yp 0x146=0 -yp 0x14C=0 game.ihx parcel-quest.gb 2>makebin.log \
    || { cat makebin.log >&2; exit 1; }
cp parcel-quest.gb "$OUT/parcel-quest.gb"
echo "built $OUT/parcel-quest.gb"
