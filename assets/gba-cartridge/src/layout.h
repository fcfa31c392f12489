/* Which game's RAM layout this build keeps: one header of addresses, offsets and ids per build.
 * build.sh passes -DLAYOUT_EMERALD for the Emerald build (LAYOUT=emerald ./build.sh). */
#ifndef LAYOUT_H
#define LAYOUT_H
#if defined(LAYOUT_EMERALD)
#include "layout_emerald.h"
#else
#include "layout_firered.h"
#endif
#endif
