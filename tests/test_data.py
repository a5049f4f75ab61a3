"""Datasets load offline with the promised shapes and splits; partitions deal every sample once.

CIFAR cannot be loaded from a fake file here: torchvision checks the md5 sum of every batch, so
only the real archives pass. The tests therefore cover what the loader itself decides for CIFAR
(the missing-folder and corrupt-file errors); MNIST, which torchvision reads without checksums,
is loaded end to end from tiny idx files written in the real format.
"""

import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from privaudit.data import DATASETS, PARTITIONS, Normalisation, load_dataset, partition
from privaudit.errors import DataError

OFFLINE = {
    # name: (total images, (C, H, W), number of classes)
    "digits": (1797, (1, 8, 8), 10),
    "lfw": (200, (1, 25, 25), 2),
    "photos": (480, (3, 32, 32), 6),
}


def _image_keys(x: torch.Tensor) -> set[bytes]:
    return {row.numpy().tobytes() for row in x}


def _classes_per_agent(labels: np.ndarray, parts: list[np.ndarray]) -> float:
    return float(np.mean([len(np.unique(labels[p])) for p in parts]))


@pytest.mark.parametrize("name", sorted(OFFLINE))
def test_offline_dataset_shapes_dtypes_and_pixel_range(name):
    total, shape, num_classes = OFFLINE[name]
    data = load_dataset(name)

    assert data.name == name
    assert data.shape == shape
    assert data.num_classes == num_classes == len(data.class_names)
    assert len(data.x_train) + len(data.x_test) == total
    assert len(data.x_test) == pytest.approx(0.2 * total, abs=num_classes)
    for x, y in ((data.x_train, data.y_train), (data.x_test, data.y_test)):
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert x.shape == (len(y), *shape)
        assert set(y.tolist()) == set(range(num_classes))
        pixels = data.normalisation.denormalise(x)
        assert pixels.min() >= -1e-6 and pixels.max() <= 1 + 1e-6
        low, high = data.normalisation.data_range()
        assert low - 1e-6 <= x.min() and x.max() <= high + 1e-6


@pytest.mark.parametrize("name", sorted(OFFLINE))
def test_offline_split_is_seeded_stratified_and_disjoint(name):
    first, again, other = load_dataset(name, seed=3), load_dataset(name, seed=3), load_dataset(name, seed=4)

    assert torch.equal(first.x_train, again.x_train) and torch.equal(first.y_test, again.y_test)
    assert not torch.equal(first.x_train, other.x_train)
    assert _image_keys(first.x_train).isdisjoint(_image_keys(first.x_test))
    train_share = torch.bincount(first.y_train) / len(first.y_train)
    test_share = torch.bincount(first.y_test) / len(first.y_test)
    assert torch.allclose(train_share, test_share, atol=0.05)


def test_test_fraction_and_max_train():
    half = load_dataset("digits", test_fraction=0.5)
    assert len(half.x_test) in (898, 899)

    full = load_dataset("digits", seed=1)
    small = load_dataset("digits", seed=1, max_train=50)
    assert len(small.x_train) == len(small.y_train) == 50
    assert _image_keys(small.x_train) <= _image_keys(full.x_train)
    assert torch.equal(small.x_test, full.x_test)
    assert torch.equal(small.x_train, load_dataset("digits", seed=1, max_train=50).x_train)


def test_lfw_labels_follow_skimage_order():
    """skimage documents its first 100 lfw_subset images as faces: label 1, 'face'."""
    from skimage.data import lfw_subset

    originals = torch.from_numpy(lfw_subset().reshape(200, -1)).float()
    data = load_dataset("lfw")
    pixels = data.normalisation.denormalise(data.x_train).reshape(len(data.x_train), -1)
    source = torch.cdist(pixels, originals).argmin(dim=1)
    assert data.class_names == ("non-face", "face")
    assert torch.equal(source < 100, data.y_train == 1)

def test_normalisation_round_trip_and_range():
    norm = Normalisation(mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616))
    x = torch.rand(4, 3, 5, 5)
    assert torch.allclose(norm.denormalise(norm.normalise(x)), x, atol=1e-6)
    low, high = norm.data_range()
    assert low == pytest.approx(-0.4914 / 0.2470) and high == pytest.approx((1 - 0.4822) / 0.2435)
    with pytest.raises(ValueError, match="expected"):
        norm.normalise(torch.rand(4, 1, 5, 5))


def test_unknown_dataset_names_the_choices():
    with pytest.raises(ValueError) as err:
        load_dataset("x")
    assert str(err.value) == ("unknown dataset 'x' (choose from digits, lfw, photos, mnist, cifar10, cifar100, folder, npz, "
                              "or a loader 'package.module:function')")
    assert DATASETS == ("digits", "lfw", "photos", "mnist", "cifar10", "cifar100")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mnist", "MNIST/raw/train-images-idx3-ubyte"),
        ("cifar10", "cifar-10-batches-py/data_batch_1"),
        ("cifar100", "cifar-100-python/train"),
    ],
)
def test_missing_folder_is_a_data_error_naming_it(tmp_path, name, expected):
    root = tmp_path / "absent"
    with pytest.raises(DataError) as err:
        load_dataset(name, data_root=root)
    message = str(err.value)
    assert "\n" not in message
    assert f"dataset '{name}'" in message and str(root) in message and expected in message
    assert "set download = true" in message

    with pytest.raises(DataError, match="data_root"):
        load_dataset(name)


def _write_idx(path: Path, array: np.ndarray) -> None:
    """idx format: zero, zero, type 0x08 (uint8), rank, then big-endian sizes and the bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def _write_mnist(root: Path, rng: np.random.Generator, n_train: int, n_test: int) -> dict[str, np.ndarray]:
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, size=(n_train, 28, 28)),
        "train-labels-idx1-ubyte": np.arange(n_train) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, size=(n_test, 28, 28)),
        "t10k-labels-idx1-ubyte": np.arange(n_test) % 10,
    }
    for filename, array in arrays.items():
        _write_idx(raw / filename, array)
    return arrays


def test_mnist_loads_from_idx_files(tmp_path):
    arrays = _write_mnist(tmp_path, np.random.default_rng(0), n_train=12, n_test=5)

    data = load_dataset("mnist", data_root=tmp_path)

    assert data.shape == (1, 28, 28) and data.num_classes == 10
    assert data.class_names == tuple("0123456789")
    assert data.x_train.dtype == torch.float32 and data.y_train.dtype == torch.int64
    pixels = data.normalisation.denormalise(data.x_train)[:, 0]
    expected = torch.from_numpy(arrays["train-images-idx3-ubyte"] / 255).float()
    assert torch.allclose(pixels, expected, atol=1e-5)
    assert data.y_train.tolist() == arrays["train-labels-idx1-ubyte"].tolist()
    assert data.y_test.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    assert len(load_dataset("mnist", data_root=tmp_path, max_train=4).x_train) == 4


def test_mnist_corrupt_file_is_a_data_error(tmp_path):
    _write_mnist(tmp_path, np.random.default_rng(0), n_train=3, n_test=2)
    (tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte").write_bytes(b"not an idx file")

    with pytest.raises(DataError, match="unreadable or corrupt"):
        load_dataset("mnist", data_root=tmp_path)


def test_cifar_files_failing_the_checksum_are_a_data_error(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for filename in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (folder / filename).write_bytes(b"fake")

    with pytest.raises(DataError, match=f"files under {tmp_path} are unreadable or corrupt"):
        load_dataset("cifar10", data_root=tmp_path)


@pytest.mark.parametrize("kind", PARTITIONS)
def test_partition_covers_every_sample_once(kind):
    labels = np.repeat(np.arange(10), 50)
    parts = partition(labels, 8, kind, seed=1, alpha=1.0, min_size=10)

    assert len(parts) == 8
    assert all(p.dtype == np.int64 and np.all(np.diff(p) > 0) for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(labels)))
    assert min(len(p) for p in parts) >= 10
    again = partition(labels, 8, kind, seed=1, alpha=1.0, min_size=10)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_label_skew_of_dirichlet_and_shards():
    labels = np.repeat(np.arange(10), 100)
    iid = _classes_per_agent(labels, partition(labels, 10, "iid"))
    dirichlet = _classes_per_agent(labels, partition(labels, 10, "dirichlet", alpha=0.1))
    shards = partition(labels, 10, "shards", shards_per_agent=2)

    assert iid == 10
    assert dirichlet < 6
    assert max(len(np.unique(labels[p])) for p in shards) <= 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_agents": 2, "kind": "random"}, "unknown partition 'random'"),
        ({"n_agents": 11}, "n_agents"),
        ({"n_agents": 0}, "n_agents"),
        ({"n_agents": 4, "min_size": 3}, "min_size 3 is impossible"),
        ({"n_agents": 5, "kind": "dirichlet", "alpha": 0.01, "min_size": 2}, "no draw in 100 tries"),
        ({"n_agents": 2, "kind": "dirichlet", "alpha": 0.0}, "alpha"),
        ({"n_agents": 4, "kind": "shards", "shards_per_agent": 3}, "12 shards"),
    ],
)
def test_partition_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        partition(np.arange(10) % 2, **kwargs)
