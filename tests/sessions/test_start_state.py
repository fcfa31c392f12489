import hashlib

import yaml

from sessions.assets import ASSETS, DEFAULT_MANIFEST
from sessions.startstate import make_start_state


def test_bundled_start_state_is_reproducible_from_power_on():
    start = yaml.safe_load((ASSETS / "cartridge" / "start.yaml").read_text())
    game = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]
    state, first = make_start_state(ASSETS / "cartridge" / "parcel-quest.gb", start["boot_frames"])
    assert hashlib.sha256(state).hexdigest() == game["initial_state_sha256"]
    assert state == (ASSETS / "cartridge" / "parcel-quest.state").read_bytes()
    assert first == start["first_frame_sha256"] == game["first_frame_sha256"]
