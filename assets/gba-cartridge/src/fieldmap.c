/* Parcel Quest Advance (FireRed build): the current map as FireRed keeps it, for the gameplay track's
 * terrain (issue 32). On every map load src/fieldmap.c InitMapLayoutData fills gBackupMapData with
 * MAPGRID_UNDEFINED, points VMap.map at it and copies the layout in with a border margin of MAP_OFFSET
 * cells (VMap.Xsize = width + 15, Ysize = height + 14); each u16 entry holds the metatile id (bits 0-9),
 * the collision (bits 10-11, 0 passable) and the elevation (bits 12-15). The people on the map are
 * gObjectEvents, each at its grid cell (map cell + MAP_OFFSET). Addresses: layout_firered.h. */
#include "game.h"
#include "gfx.h"

#define GRID ((volatile u16 *)ADDR_BACKUP_MAP_DATA)

static void put_u16(u8 *p, u16 v) { p[0] = (u8)v; p[1] = (u8)(v >> 8); }
static void put_u32(volatile u8 *p, u32 v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (u8)(v >> (8 * i));
}

/* the map's cells (our metatile ids, MAP_W x MAP_H): the metatile id as is, collision 1 where our walk rule
 * (main.c step: only KIND_WALK and KIND_TALL cells can be entered) blocks, elevation 0 (we keep none) */
void fieldmap_load(const u8 *cells)
{
    const u32 width = MAP_W + 2 * MAP_OFFSET + 1, height = MAP_H + 2 * MAP_OFFSET;
    /* FireRed fills the whole buffer; the grid's own cells are enough (nothing reads past them), and a
     * map load stays within the frame it starts in */
    for (u32 i = 0; i < width * height; i++)
        GRID[i] = MAPGRID_UNDEFINED;
    for (int y = 0; y < MAP_H; y++)
        for (int x = 0; x < MAP_W; x++) {
            u8 meta = cells[y * MAP_W + x];
            u8 kind = gfx_meta_kind[meta];
            u16 blocked = (kind == KIND_WALK || kind == KIND_TALL) ? 0 : (u16)(1u << 10);
            GRID[(y + MAP_OFFSET) * width + x + MAP_OFFSET] = (u16)((meta & MAPGRID_METATILE_ID_MASK) | blocked);
        }
    volatile u8 *vmap = (volatile u8 *)ADDR_VMAP;
    put_u32(vmap, width);
    put_u32(vmap + 4, height);
    put_u32(vmap + 8, ADDR_BACKUP_MAP_DATA);
}

/* ------------------------------------------------------------------ object events */

static u8 next_object;

/* FireRed's graphics id for each of our sprites (include/constants/event_objects.h) */
static u8 graphics_of(u16 obj)
{
    switch (obj) {
    case OBJ_PROF: return OBJ_EVENT_GFX_PROF_OAK;
    case OBJ_RIVAL: return OBJ_EVENT_GFX_BLUE;
    case OBJ_MOM: return OBJ_EVENT_GFX_MOM;
    case OBJ_CLERK: return OBJ_EVENT_GFX_CLERK;
    case OBJ_MAN: return OBJ_EVENT_GFX_OLD_MAN_1;
    case OBJ_GIRL: return OBJ_EVENT_GFX_LITTLE_GIRL;
    case OBJ_BALL: return OBJ_EVENT_GFX_ITEM_BALL;
    default: return OBJ_EVENT_GFX_RED_NORMAL;
    }
}

/* struct ObjectEvent (include/global.fieldmap.h): active:1 bit 0 and isPlayer:1 bit 16 of the first word,
 * graphicsId 0x05, localId 0x08, mapNum 0x09, mapGroup 0x0A, initialCoords 0x0C, currentCoords 0x10,
 * previousCoords 0x14 (s16 x, y grid cells), facingDirection:4 at 0x18 (DIR_SOUTH 1 .. DIR_EAST 4) */
static void write_object(u8 x, u8 y, u8 graphics, u8 local_id, int player, u8 dir)
{
    if (next_object >= OBJECT_EVENTS_COUNT)
        return;
    u8 *o = (u8 *)ADDR_OBJECT_EVENTS + next_object++ * OBJECT_EVENT_SIZE;
    memset(o, 0, OBJECT_EVENT_SIZE);
    o[0] = 0x01;
    o[2] = player ? 0x01 : 0x00;
    o[5] = graphics;
    o[8] = local_id;
    o[9] = sb1()[SB1_MAP_NUM];
    o[0xA] = sb1()[SB1_MAP_GROUP];
    for (int at = 0x0C; at <= 0x14; at += 4) {
        put_u16(o + at, (u16)(x + MAP_OFFSET));
        put_u16(o + at + 2, (u16)(y + MAP_OFFSET));
    }
    o[0x18] = (u8)(dir | (dir << 4)); /* facingDirection, movementDirection */
}

/* the player first (our FACE_DOWN, UP, LEFT, RIGHT are 0..3: DIR_SOUTH, NORTH, WEST, EAST are 1..4) */
void fieldmap_objects_begin(u8 px, u8 py, u8 facing)
{
    next_object = 0;
    write_object(px, py, OBJ_EVENT_GFX_RED_NORMAL, OBJECT_EVENT_ID_PLAYER, 1, (u8)(facing + 1));
}

void fieldmap_object_add(u8 x, u8 y, u16 obj)
{
    write_object(x, y, graphics_of(obj), (u8)next_object, 0, 1);
}

/* the slots not in use are inactive */
void fieldmap_objects_end(void)
{
    for (u8 i = next_object; i < OBJECT_EVENTS_COUNT; i++)
        ((u8 *)ADDR_OBJECT_EVENTS)[i * OBJECT_EVENT_SIZE] = 0;
}
