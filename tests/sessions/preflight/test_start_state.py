import hashlib

import yaml

from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.startstate import make_start_state


def test_bundled_start_state_is_reproducible_from_power_on():
    start = yaml.safe_load((ASSETS / "cartridge" / "start.yaml").read_text())
    game = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]
    state, first = make_start_state(ASSETS / "cartridge" / "parcel-quest.gb", start["boot_frames"])
    pinned = game["start_states"]["pyboy"]
    assert hashlib.sha256(state).hexdigest() == pinned["sha256"]
    assert state == (ASSETS / "cartridge" / "parcel-quest.state").read_bytes()
    assert first == start["first_frame_sha256"] == pinned["first_frame_sha256"]
