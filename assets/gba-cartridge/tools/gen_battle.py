#!/usr/bin/env python3
"""Write src/battle_data.inc (the FireRed build's battle tables, C) from tools/battle_data.py, and the battle
tables of the definition the cartridge's battle tasks use (battle_tables()). Committed output; rerun after a
change to battle_data.py:  uv run python assets/gba-cartridge/tools/gen_battle.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import battle_data as d  # noqa: E402

OUT = HERE.parent / "src" / "battle_data.inc"


def c_name(name: str) -> str:
    return name.replace(" ", "_").replace("-", "_")


def c_source() -> str:
    out = ["/* Written by tools/gen_battle.py from tools/battle_data.py: do not edit. The FireRed build's battle",
           " * tables: original species, moves, items and abilities; Gen 3's type ids and chart. */", ""]
    for name, tid in d.TYPES.items():
        out.append(f"#define TYPE_{name} {tid}")
    for aid, name, why in d.ABILITIES:
        out.append(f"#define ABIL_{c_name(name)} {aid} /* {why} */")
    for iid, name, why in d.ITEMS:
        out.append(f"#define ITEM_{c_name(name)} {iid} /* {why} */")
    for mid, name, *_ in d.MOVES:
        out.append(f"#define MOVE_{c_name(name)} {mid}")
    out += ["", "typedef struct { u16 id; const char *name; u8 type1, type2; u8 base[6]; u8 ability[2]; } "
            "SpeciesInfo;",
            "typedef struct { u16 id; const char *name; u8 type, power, accuracy, pp; s8 priority; } MoveInfo;",
            "typedef struct { u16 species; u8 level; u16 moves[4]; u16 item; u8 ability_num, nature, ivs; "
            "u8 evs[6]; } TrainerMon;",
            "typedef struct { u8 id; const char *name; const char *text; u8 count; const TrainerMon *party; } "
            "Trainer;",
            "", "/* base stats: hp, attack, defense, speed, sp. attack, sp. defense */",
            "static const SpeciesInfo species_info[] = {"]
    for sid, name, types, base, abilities, _ in d.SPECIES:
        t1, t2 = d.TYPES[types[0]], d.TYPES[types[-1]]
        ab = [d.ABILITY_BY_NAME[a][0] for a in abilities]
        ab = ab + ab[:1] if len(ab) == 1 else ab
        out.append(f'    {{{sid}, "{name}", {t1}, {t2}, {{{", ".join(map(str, base))}}}, {{{ab[0]}, {ab[1]}}}}},')
    out += ["};", "#define SPECIES_INFO_COUNT (sizeof species_info / sizeof species_info[0])", "",
            "static const MoveInfo move_info[] = {"]
    for mid, name, typ, power, acc, pp, prio in d.MOVES:
        out.append(f'    {{{mid}, "{name}", {d.TYPES[typ]}, {power}, {acc}, {pp}, {prio}}},')
    out += ["};", "#define MOVE_INFO_COUNT (sizeof move_info / sizeof move_info[0])", "",
            "/* attacker, defender, multiplier x10 */", "static const u8 type_chart[][3] = {"]
    for a, b, m in d.CHART:
        out.append(f"    {{TYPE_{a}, TYPE_{b}, {m}}},")
    out += ["};", "#define TYPE_CHART_COUNT (sizeof type_chart / sizeof type_chart[0])", ""]
    for tid, _, _, party in d.TRAINERS:
        out.append(f"static const TrainerMon trainer{tid}_party[] = {{")
        for m in party:
            moves = [f"MOVE_{c_name(x)}" for x in m["moves"]] + ["0"] * (4 - len(m["moves"]))
            item = f"ITEM_{c_name(m['item'])}" if m["item"] else "0"
            evs = ", ".join(map(str, m["evs"]))
            out.append(f"    {{{d.SPECIES_BY_NAME[m['species']][0]}, {m['level']}, {{{', '.join(moves)}}}, {item}, "
                       f"{m['ability']}, {d.NATURES.index(m['nature'])}, {m['ivs']}, {{{evs}}}}},")
        out.append("};")
    out.append("static const Trainer trainers[] = {")
    for tid, name, text, party in d.TRAINERS:
        out.append(f'    {{{tid}, "{name}", "{text}", {len(party)}, trainer{tid}_party}},')
    out += ["};", "#define TRAINER_COUNT (sizeof trainers / sizeof trainers[0])", ""]
    return "\n".join(out)


def battle_tables() -> dict:
    """The adapter's species, moves and items tables (engine.battle.gen3_battle Gen3Species, Gen3Move, Gen3Item)."""
    species = [{"id": sid, "name": name, "types": types, "growth_rate": "medium_fast", "abilities": abilities,
                "base": dict(zip(d.STAT_NAMES, base, strict=True)), "moves": d.learnset(types, coverage)}
               for sid, name, types, base, abilities, coverage in d.SPECIES]
    moves = [{"id": mid, "name": name, "pp": pp, "type": typ, "power": power, "accuracy": acc}
             for mid, name, typ, power, acc, pp, _ in d.MOVES]
    items = [{"id": iid, "name": name, "effect": why} for iid, name, why in d.ITEMS]
    abilities = [{"name": name, "effect": why} for _, name, why in d.ABILITIES]
    return {"species": species, "moves": moves, "items": items, "abilities": abilities}




# -- the definition the cartridge's battle tasks use --------------------------------------------------

GAMES = HERE.parent.parent / "games"
DEFINITION = GAMES / "parcel-quest-advance-battles.yaml"
BOSS_FLAG = 0x500  # pret/pokefirered include/constants/flags.h TRAINER_FLAGS_START


def definition_text(firered: str) -> str:
    """The bundled FireRed definition with its battle tables replaced by the cartridge's, its menus'
    waits as B presses (the cartridge's battle text goes on with A or B, never by itself; B does nothing
    at a menu that cannot be left, so spare ones are harmless), and one flag field per boss."""
    import yaml

    head = firered[:firered.index("# Seed 004's battle adapter")]
    head = head.replace("id: pokemon-firered-leafgreen-en\n", "id: parcel-quest-advance-battles\n", 1)
    head = head.replace("title: Pokémon FireRed / LeafGreen (English, 1.0 and 1.1)\n",
                        "title: Parcel Quest Advance battles (FireRed layout)\n", 1)
    anchor = head.index("  beat_rival_lab:")
    line_end = head.index("\n", anchor) + 1
    flags = "".join(f"  beat_boss_{tid}: {{flag: event_flags, index: {BOSS_FLAG + tid:#x}, source: \"the "
                    f"cartridge's trainer flag of {name} (pret/pokefirered TRAINER_FLAGS_START 0x500 + id {tid})\"}}\n"
                    for tid, name, _, _ in d.TRAINERS)
    head = head[:line_end] + flags + PREPARATION_FIELDS + head[line_end:]
    head = _insert_before(head, "\nfields:\n", BALLS_ARRAY)  # the arrays section's end
    head = _cartridge_names(head)
    head = _insert_before(head, "    outcomes:\n", BALLS_INVENTORY)
    firered_battle = yaml.safe_load(firered[firered.index("\nbattle:"):])["battle"]
    battle = {k: firered_battle[k] for k in ("source", "party", "screen")}
    battle["source"] = ("the FireRed definition's addresses (pret/pokefirered symbols branch); the tables are Parcel "
                        "Quest Advance's own (assets/gba-cartridge/tools/battle_data.py)")
    battle["menus"] = {**firered_battle["menus"], "to_menu": ["B"] * 8, "settle": ["B"] * 10,
                       "before": ["A"] + ["B"] * 6}
    battle.update(battle_tables())
    return (head + "# Written by assets/gba-cartridge/tools/gen_battle.py from the FireRed definition above this line\n"
            "# and tools/battle_data.py: the same RAM, the cartridge's own species, moves and items.\n"
            + yaml.safe_dump({"battle": battle}, sort_keys=False, width=120) + SHORTCUTS)


def _cartridge_names(head: str) -> str:
    """The gameplay track's party named with the cartridge's own moves and species (tools/battle_data.py), not
    FireRed's: the FireRed definition's two name lists there give way to these."""
    start = head.index("      moves:\n        names:", head.index("  gameplay:"))
    end = head.index("    outcomes:\n", start)
    moves = "".join(f"          - {{id: {mid}, name: {name}}}\n" for mid, name, *_ in d.MOVES)
    species = "".join(f"        - {{id: {sid}, name: {name}}}\n" for sid, name, *_ in d.SPECIES)
    return (head[:start] + "      moves:\n        names:      # the cartridge's own (tools/battle_data.py MOVES)\n"
            + moves + "      species:      # the cartridge's own (tools/battle_data.py SPECIES)\n" + species
            + head[end:])


def _insert_before(text: str, anchor: str, block: str) -> str:
    """`block` inserted at the first `anchor` (the FireRed definition's own line, kept)."""
    at = text.index(anchor)
    return text[:at] + block + text[at:]


# The cartridge's balls pocket as the gameplay track's inventory (use_item's argument is checked against it).
BALLS_ARRAY = (
    "  # The cartridge's addition (tools/gen_battle.py): struct ItemSlot bagPocket_PokeBalls[BAG_POKEBALLS_COUNT 13]\n"
    "  # at SaveBlock1+0x0430, quantities keyed as the key items' are (src/item.c GetBagItemQuantity).\n"
    "  bag_poke_balls: {kind: items, base: sb1, address: 0x430, slots: 13, stride: 4, id: u16le, quantity: u16le, "
    "key: qty_key, source: \"pret/pokefirered include/global.h SaveBlock1.bagPocket_PokeBalls /*0x0430*/; "
    "include/constants/global.h BAG_POKEBALLS_COUNT\"}\n")
BALLS_INVENTORY = (
    "    # Parcel Quest Advance's addition (tools/gen_battle.py): the balls pocket (pret/pokefirered\n"
    "    # include/global.h SaveBlock1.bagPocket_PokeBalls /*0x0430*/, BAG_POKEBALLS_COUNT 13; src/item.c\n"
    "    # GetBagItemQuantity: key ^ qty), the one pocket the cartridge's battle BAG uses; no rung reads it.\n"
    "    # ITEM_POKE_BALL 4 (include/constants/items.h).\n"
    "    inventory:\n"
    "      items: bag_poke_balls\n"
    "      names: [{id: 4, name: POKE BALL}]\n"
    "      source: pret/pokefirered include/global.h SaveBlock1.bagPocket_PokeBalls; the cartridge's ram.c bag_add\n")
# The battle menu's fields the cartridge's use_item and switch_to read (battle_menu, action_cursor,
# party_order_0..2) are the FireRed definition's own (its shortcuts read them too), so the head carries them.

# What the cartridge's preparation mechanics change (issue 32 item 4; src/main.c mom_heal, shop_buy,
# field_party_switch): no rung and no track reads them; the preparation and menu tasks' goals do
# (assets/tasks/pqa-heal-at-home.yaml, pqa-buy-a-ball.yaml, pqa-reorder-party.yaml).
PREPARATION_FIELDS = (
    "  # Read by the preparation tasks (tools/gen_battle.py): the money the shop takes, the cartridge's own\n"
    "  # counters of heals and purchases and the lead after a party SWITCH (the party's records are the gameplay\n"
    "  # track's party view, the BALLS its inventory, bag_poke_balls: a goal may read neither)\n"
    "  money_raw: {base: sb1, address: 0x290, kind: u32le, source: \"pret/pokefirered include/global.h "
    "SaveBlock1.money /*0x0290*/, stored as money ^ SaveBlock2.encryptionKey (src/money.c GetMoney): money is "
    "money_raw ^ qty_key\"}\n"
    "  rests: {var: vars, index: 0x40F0, source: \"our cartridge's own var (src/main.c mom_heal): heals at home that "
    "restored HP; no FireRed meaning\"}\n"
    "  purchases: {var: vars, index: 0x40F1, source: \"our cartridge's own var (src/main.c shop_buy): items bought at "
    "the shop; no FireRed meaning\"}\n"
    "  switched_lead: {var: vars, index: 0x40F2, source: \"our cartridge's own var (src/main.c field_party_switch): "
    "the lead's species after the START menu party list's last SWITCH, 0 before any; no FireRed meaning\"}\n")

# The cartridge's battle menus as use_item and switch_to (engine.loop.shortcuts, docs/tasks.md): offered at the
# action menu (src/battle_fr.inc action_menu: gBattleCommunication[0] 1). The 2x2 action cursor keeps its place
# between turns: UP (or LEFT) first puts it on the top row (or left column) from anywhere, then one cursor step
# reaches BAG (1) or PARTY (2). BAG throws a BALL in a wild battle (battle_ball: no bag in trainer battles). The
# party list opens on its first row in the battle's order (party_menu: party_cursor 0, rows p_order, written to
# gBattlePartyCurrentOrder): DOWN to the row of the slot asked for, A, then A on SHIFT (party_sub_draw).
SHORTCUTS = """
shortcuts:
  use_item:
    source: assets/gba-cartridge/src/battle_fr.inc (action_menu, battle_input BS_ACTION, battle_ball)
    when: [{field: in_battle, eq: 1}, {field: battle_menu, eq: 1}]
    steps:
      - {press: UP}
      - {cursor: action_cursor, to: 1, up: LEFT, down: RIGHT}
      - {press: A}
  switch_to:
    source: assets/gba-cartridge/src/battle_fr.inc (action_menu, party_menu, battle_input BS_PARTY and BS_PARTY_SUB)
    when: [{field: in_battle, eq: 1}, {field: battle_menu, eq: 1}]
    steps:
      - {press: LEFT}
      - {cursor: action_cursor, to: 2}
      - {press: A}
      - {press: DOWN, times: argument, order: [party_order_0, party_order_1, party_order_2]}
      - {press: A}
      - {press: A}
"""


def main() -> int:
    OUT.write_text(c_source(), encoding="utf-8")
    firered = (GAMES / "pokemon-firered-leafgreen-en.yaml").read_text(encoding="utf-8")
    DEFINITION.write_text(definition_text(firered), encoding="utf-8")
    print(f"wrote {OUT} and {DEFINITION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
