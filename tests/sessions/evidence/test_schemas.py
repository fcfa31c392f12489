"""The JSON Schemas published in every evidence folder are the records' own, up to date."""

from sessions.evidence.schemas import generated, published


def test_published_schemas_match_the_record_models():
    # After changing a record model: `uv run python -m sessions.evidence.schemas` regenerates assets/schemas/.
    assert published() == generated()


def test_every_evidence_file_kind_has_a_schema(dry_run):
    folder = dry_run[0]
    names = {p.name for p in (folder / "schemas").iterdir()}
    for kind in ("trace-line", "input", "response", "memory-op", "annotation", "result", "trial", "summary",
                 "run-event", "schedule", "blinding", "void"):
        assert f"{kind}.schema.json" in names
