"""Datasets the attacks run on, and the ways they are split among the agents of a decentralized run.

Three datasets ship with the installed packages and load with no network (`digits`, `lfw`,
`photos`), so every test and demo runs offline; `mnist`, `cifar10` and `cifar100` are read through
torchvision from a folder the user provides. Every dataset comes back normalised with a fixed,
documented per-channel map, so an attack can turn a reconstruction back into [0, 1] pixels and
score it against the private original.

Users bring their own data three ways (`USER_DATA`): `folder`, a folder of images in class
sub-folders (torchvision's ImageFolder layout); `npz`, an .npz archive of arrays; or a loader named
by import path, `package.module:function`, returning arrays or tensors. They go through the same
split, caps and errors as the shipped sets, and carry a `Content`: where they came from and a
SHA-256 of what was read, so every result says which data it was computed on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import os
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

from privaudit.errors import DataError, PrivauditError
from privaudit.files import read_regular
from privaudit.limits import exceeded

DATASETS: tuple[str, ...] = ("digits", "lfw", "photos", "mnist", "cifar10", "cifar100")
USER_DATA: tuple[str, ...] = ("folder", "npz")
"""A user's own data read from `path`; a loader named by import path (`is_loader`) is the third way."""
PARTITIONS: tuple[str, ...] = ("iid", "dirichlet", "shards")


def is_loader(name: str) -> bool:
    """Whether the dataset `name` is a loader named by import path, `package.module:function`."""
    return ":" in name


@dataclass(frozen=True)
class Content:
    """Where a user's data came from and a SHA-256 of what was read (the files' bytes, or the
    arrays a loader returned): part of the cells' identity and of their rows, so an edited image
    reruns the cells and a result names the data it was computed on."""

    source: str
    sha256: str

    def as_dict(self) -> dict[str, str]:
        return {"source": self.source, "sha256": self.sha256}


@dataclass(frozen=True)
class Normalisation:
    """Per-channel affine map from raw pixels in [0, 1] to model inputs: (x - mean) / std.

    Kept with the data so that attacks can undo it: reconstruction quality is measured on the
    pixels a person would see, and PSNR/SSIM need the range the normalised values span.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.mean) != len(self.std) or not self.mean:
            raise ValueError(f"normalisation needs one mean and one std per channel, got {self}")
        if min(self.std) <= 0:
            raise ValueError(f"normalisation std must be positive, got {self.std}")

    def _affine(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and std shaped [C, 1, 1] to broadcast over [..., C, H, W] on x's device and dtype."""
        if x.dim() < 3 or x.shape[-3] != len(self.mean):
            raise ValueError(
                f"expected [..., {len(self.mean)}, H, W] pixels, got shape {tuple(x.shape)}"
            )
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(-1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(-1, 1, 1)
        return mean, std

    def normalise(self, x: Tensor) -> Tensor:
        """Map [..., C, H, W] pixels in [0, 1] to model inputs."""
        mean, std = self._affine(x)
        return (x - mean) / std

    def denormalise(self, x: Tensor) -> Tensor:
        """Map model inputs [..., C, H, W] back to pixels in [0, 1] (the inverse of `normalise`)."""
        mean, std = self._affine(x)
        return x * std + mean

    def data_range(self) -> tuple[float, float]:
        """(min, max) that normalised pixels can take over all channels, the range PSNR/SSIM need."""
        low = min((0.0 - m) / s for m, s in zip(self.mean, self.std))
        high = max((1.0 - m) / s for m, s in zip(self.mean, self.std))
        return low, high


@dataclass(frozen=True, eq=False)
class Dataset:
    """A normalised train/test split; tensors stay out of repr and equality because they are large.

    `task` is "classification" (integer labels) or "regression" (float targets, `num_classes`
    is then the target size). Synthetic problems (`privaudit/synthetic.py`) also carry the
    parameter the agents should find (`truth`) and which agent generated each training sample
    (`owners`), since their data are drawn per agent rather than partitioned from a pool.
    """

    name: str
    x_train: Tensor = field(repr=False)
    y_train: Tensor = field(repr=False)
    x_test: Tensor = field(repr=False)
    y_test: Tensor = field(repr=False)
    num_classes: int
    normalisation: Normalisation
    class_names: tuple[str, ...]
    task: str = "classification"
    truth: Tensor | None = field(default=None, repr=False)
    owners: np.ndarray | None = field(default=None, repr=False)
    content: Content | None = None
    """A user's data: its source and hash (`Content`); None for the shipped sets."""

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one input ((C, H, W) for images), what a model's first layer is built for."""
        return tuple(int(size) for size in self.x_train.shape[1:])

    def to(self, device: torch.device) -> Dataset:
        """The same split with its tensors on `device`."""
        return dataclasses.replace(
            self, x_train=self.x_train.to(device), y_train=self.y_train.to(device), x_test=self.x_test.to(device),
            y_test=self.y_test.to(device), truth=None if self.truth is None else self.truth.to(device))


# Offline sets are centred on mid-grey so that normalised pixels span [-1, 1]; MNIST and CIFAR use
# the per-channel statistics of their training sets, as the models in the literature do.
_HALF = Normalisation(mean=(0.5,), std=(0.5,))
_NORMALISATIONS: dict[str, Normalisation] = {
    "digits": _HALF,
    "lfw": _HALF,
    "photos": Normalisation(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)),
    "mnist": Normalisation(mean=(0.1307,), std=(0.3081,)),
    "cifar10": Normalisation(mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616)),
    "cifar100": Normalisation(mean=(0.5071, 0.4865, 0.4409), std=(0.2673, 0.2564, 0.2762)),
}

_DIGIT_NAMES = tuple(str(d) for d in range(10))

# Photographs bundled inside the scikit-image wheel (skimage/data), name -> file. Grayscale ones
# (camera, coins) are repeated over three channels.
_PHOTOS: dict[str, str] = {
    "astronaut": "astronaut.png",
    "camera": "camera.png",
    "chelsea": "chelsea.png",
    "coffee": "coffee.png",
    "rocket": "rocket.jpg",
    "coins": "coins.png",
}
_PHOTO_SHORT_SIDE = 256
_CROP = 32
_FLAT_CROP_STD = 0.02

# Files torchvision reads for each dataset, relative to data_root.
_TORCHVISION_FILES: dict[str, tuple[str, ...]] = {
    "mnist": (
        "MNIST/raw/train-images-idx3-ubyte",
        "MNIST/raw/train-labels-idx1-ubyte",
        "MNIST/raw/t10k-images-idx3-ubyte",
        "MNIST/raw/t10k-labels-idx1-ubyte",
    ),
    "cifar10": tuple(f"cifar-10-batches-py/{f}" for f in (
        "data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5",
        "test_batch", "batches.meta",
    )),
    "cifar100": ("cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"),
}


@dataclass(frozen=True)
class _Raw:
    """Pixels before normalisation, [n, C, H, W]: float32 in [0, 1] or uint8 in [0, 255]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]


_DOWNLOADS_REFUSED = False


@contextlib.contextmanager
def downloads_refused() -> Iterator[None]:
    """Within the block a dataset asked for with `download = true` is read from its folder only:
    `privaudit check` creates no folder and reaches no network."""
    global _DOWNLOADS_REFUSED
    before, _DOWNLOADS_REFUSED = _DOWNLOADS_REFUSED, True
    try:
        yield
    finally:
        _DOWNLOADS_REFUSED = before


def load_dataset(
    name: str,
    *,
    data_root: str | Path | None = None,
    download: bool = False,
    seed: int = 0,
    test_fraction: float = 0.2,
    max_train: int | None = None,
    path: str | Path | None = None,
    size: tuple[int, int] | None = None,
    loader: Callable[[], Any] | None = None,
) -> Dataset:
    """Load a dataset normalised and split into train and test.

    The offline sets (digits, lfw, photos) have no official split, so they get a stratified split
    drawn from `seed` with `test_fraction` of each class held out; mnist, cifar10 and cifar100 keep
    their standard split and need `data_root`. A user's data (`folder` or `npz` at `path`, or a
    loader: `name` is its import path and `loader` the function) keeps the test arrays it gives,
    else is split like the offline sets (`user_source`). `max_train` keeps a random subset of the
    training set, drawn from `seed`, for quick runs. Raw pixels are cached per process, so loading
    again is cheap.
    """
    if name not in DATASETS and name not in USER_DATA and not is_loader(name):
        raise ValueError(f"unknown dataset {name!r} (choose from {', '.join(DATASETS + USER_DATA)}, or a loader "
                         "'package.module:function')")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    if max_train is not None and max_train < 1:
        raise ValueError(f"max_train must be at least 1, got {max_train}")

    content = None
    if name in USER_DATA or is_loader(name):
        source = user_source(name, path=path, size=size, loader=loader)
        raw, normalisation, content = source.split(seed, test_fraction), source.normalisation(), source.content
    elif name in _TORCHVISION_FILES:
        if data_root is None:
            expected = ", ".join(_TORCHVISION_FILES[name])
            raise DataError(
                f"dataset {name!r}: no data_root given (expected {expected} under it); "
                "set data_root to the folder holding them"
            )
        root = _root(name, data_root)
        try:
            raw = _torchvision_raw(name, root, download and not _DOWNLOADS_REFUSED)
        except DataError:
            if download and _DOWNLOADS_REFUSED:
                raise DataError(f"dataset {name!r}: no data under {root} yet: a run downloads it (download = true); "
                                "privaudit check reads only what is there") from None
            raise
    else:
        raw = _split(name, seed, test_fraction)
    if content is None:
        normalisation = _NORMALISATIONS[name]

    train = np.arange(len(raw.y_train))
    if max_train is not None and max_train < len(train):
        train = np.sort(np.random.default_rng(seed).choice(len(train), size=max_train, replace=False))

    return Dataset(
        name=name,
        x_train=_model_inputs(normalisation, raw.x_train[train]),
        y_train=torch.from_numpy(raw.y_train[train].astype(np.int64)),
        x_test=_model_inputs(normalisation, raw.x_test),
        y_test=torch.from_numpy(raw.y_test.astype(np.int64)),
        num_classes=len(raw.class_names),
        normalisation=normalisation,
        class_names=raw.class_names,
        content=content,
    )


def _root(name: str, data_root: str | Path) -> str:
    """`data_root` as an absolute path, `~` and `~user` expanded; a DataError naming it when it
    names a user this machine does not have (`~nobody-here/x`) or no home is known."""
    try:
        return str(Path(data_root).expanduser().resolve())
    except RuntimeError as error:
        raise DataError(f"dataset {name!r}: data_root {str(data_root)!r} starts with a '~' this machine cannot "
                        f"expand ({error})") from None


def _model_inputs(normalisation: Normalisation, x: np.ndarray) -> Tensor:
    """Images [n, C, H, W] as pixels in [0, 1] normalised; feature vectors [n, d] (a user's
    arrays) as given."""
    return normalisation.normalise(_pixels(x)) if x.ndim == 4 else _pixels(x)


def _pixels(x: np.ndarray) -> Tensor:
    """Float32 pixels in [0, 1] from either raw storage type (a fresh copy, never the cache)."""
    tensor = torch.tensor(x)
    return tensor.float().div_(255.0) if x.dtype == np.uint8 else tensor.float()


def _split(name: str, seed: int, test_fraction: float) -> _Raw:
    """Stratified, seeded train/test split of an offline dataset (the whole set is cached)."""
    from sklearn.model_selection import train_test_split

    x, y, class_names = _offline(name)
    train, test = train_test_split(
        np.arange(len(y)), test_size=test_fraction, stratify=y, random_state=seed
    )
    return _Raw(x[train], y[train], x[test], y[test], class_names)


@functools.lru_cache(maxsize=None)
def _offline(name: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """All images [n, C, H, W] float32 in [0, 1], labels and class names of an offline dataset."""
    if name == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = (digits.images / 16.0).astype(np.float32)[:, None]
        return _frozen(x), _frozen(digits.target.astype(np.int64)), _DIGIT_NAMES
    if name == "lfw":
        faces = _skimage_file("lfw", "lfw_subset.npy", np.load)
        # skimage documents the first 100 images as faces and the last 100 as non-faces.
        y = (np.arange(len(faces)) < len(faces) // 2).astype(np.int64)
        return _frozen(faces.astype(np.float32)[:, None]), _frozen(y), ("non-face", "face")
    return _photo_crops()


def _photo_crops() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """32x32 RGB crops of the photographs bundled with scikit-image, labelled by photograph.

    Each photograph is resized (anti-aliased) so its shorter side is 256 px, then cut into the
    non-overlapping grid of 32x32 crops from its top-left corner; leftover border pixels are
    dropped. Crops that do not overlap cannot leak one another into the test split. Near-uniform
    crops (pixel std below 0.02, e.g. clear sky) are discarded because any attack reconstructs
    them trivially and they would inflate its scores. This gives 480 crops over 6 classes.
    """
    from skimage.color import gray2rgb
    from skimage.io import imread
    from skimage.transform import resize
    from skimage.util import img_as_float32

    crops, labels = [], []
    for label, filename in enumerate(_PHOTOS.values()):
        image = img_as_float32(_skimage_file("photos", filename, imread))
        if image.ndim == 2:
            image = gray2rgb(image)
        scale = _PHOTO_SHORT_SIDE / min(image.shape[:2])
        height, width = round(image.shape[0] * scale), round(image.shape[1] * scale)
        image = resize(image, (height, width), anti_aliasing=True).astype(np.float32)
        for top in range(0, height - _CROP + 1, _CROP):
            for left in range(0, width - _CROP + 1, _CROP):
                crop = image[top : top + _CROP, left : left + _CROP]
                if crop.std() >= _FLAT_CROP_STD:
                    crops.append(crop.transpose(2, 0, 1))
                    labels.append(label)
    x = np.clip(np.stack(crops), 0.0, 1.0)
    return _frozen(x), _frozen(np.array(labels, dtype=np.int64)), tuple(_PHOTOS)


def _skimage_file(dataset: str, filename: str, reader: Callable[[str], Any]) -> Any:
    """Read a file shipped in scikit-image's data folder, never through its downloader.

    skimage.data's own loaders fall back to a network fetch (and silently skip pytest tests) when
    a file is missing; reading the bundled file directly fails loudly and offline instead.
    """
    from skimage.data import data_dir

    path = Path(data_dir) / filename
    try:
        return reader(str(path))
    except (OSError, ValueError) as err:
        raise DataError(
            f"dataset {dataset!r}: cannot read {filename} under {data_dir} ({err}); "
            "it ships with scikit-image, so reinstall scikit-image"
        ) from err


def _frozen(array: np.ndarray) -> np.ndarray:
    """Mark a cached array read-only so no caller can alter what later loads return."""
    array.flags.writeable = False
    return array


@functools.lru_cache(maxsize=None)
def _torchvision_raw(name: str, root: str, download: bool) -> _Raw:
    """Standard train/test split of mnist, cifar10 or cifar100 read by torchvision from `root`."""
    import torchvision

    cls = {
        "mnist": torchvision.datasets.MNIST,
        "cifar10": torchvision.datasets.CIFAR10,
        "cifar100": torchvision.datasets.CIFAR100,
    }[name]
    expected = ", ".join(_TORCHVISION_FILES[name])
    # torchvision reports missing or corrupt files as RuntimeError, failed downloads as OSError
    # (URLError), and malformed idx files through asserts, TypeError and ValueError.
    try:
        train = cls(root, train=True, download=download)
        test = cls(root, train=False, download=download)
    except (RuntimeError, OSError, AssertionError, TypeError, ValueError) as err:
        if download:
            detail = str(err).splitlines()[0] if str(err) else type(err).__name__
            problem, remedy = f"download into {root} failed ({detail})", "put the files there by hand"
        elif all((Path(root) / f).is_file() for f in _TORCHVISION_FILES[name]):
            problem, remedy = f"files under {root} are unreadable or corrupt", "replace them"
        else:
            problem, remedy = f"no data under {root}", "put the files there or set download = true"
        raise DataError(f"dataset {name!r}: {problem} (expected {expected}); {remedy}") from err

    class_names = _DIGIT_NAMES if name == "mnist" else tuple(train.classes)
    for part in (train, test):
        labels = np.asarray(part.targets)
        outside = labels[(labels < 0) | (labels >= len(class_names))]
        if outside.size:
            raise DataError(f"dataset {name!r}: files under {root} hold label {int(outside[0])} outside the "
                            f"{len(class_names)} classes (expected {expected}); replace them")
    return _Raw(
        x_train=_frozen(_nchw(train.data)),
        y_train=_frozen(np.asarray(train.targets, dtype=np.int64)),
        x_test=_frozen(_nchw(test.data)),
        y_test=_frozen(np.asarray(test.targets, dtype=np.int64)),
        class_names=class_names,
    )


def _nchw(data: Tensor | np.ndarray) -> np.ndarray:
    """uint8 [n, C, H, W] from torchvision's storage: MNIST's [n, H, W] tensor, CIFAR's [n, H, W, C]."""
    array = np.asarray(data, dtype=np.uint8)
    return array[:, None] if array.ndim == 3 else np.ascontiguousarray(array.transpose(0, 3, 1, 2))


# A user's own data: an image folder, an .npz archive, or a loader by import path.

IMAGE_SUFFIXES: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm",
                                   ".pgm")
"""The files an image folder's classes hold; other files (a README, `.DS_Store`) are passed over, as
torchvision's ImageFolder does."""
_GRAY_MODES = frozenset({"1", "L", "LA"})
_EIGHT_BIT_MODES = _GRAY_MODES | {"P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV"}
ARRAYS: tuple[str, ...] = ("x_train", "y_train", "x_test", "y_test")
"""The arrays an .npz archive or a loader gives; the test pair is optional (else split off)."""
_DECODED: dict[tuple[str, tuple[int, int] | None], _UserSource] = {}
_DECODED_KEPT = 4


@dataclass(frozen=True)
class _UserSource:
    """A user's data as read and checked, before the split: inputs [n, ...] (uint8 pixels or
    float32), integer labels, the test pair when the user gave one, and the content read."""

    name: str
    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    class_names: tuple[str, ...]
    content: Content

    @property
    def images(self) -> bool:
        return self.x.ndim == 4

    def normalisation(self) -> Normalisation:
        """Images get the offline sets' fixed map, mean 0.5 and std 0.5 per channel (pixels in
        [-1, 1]): fixed rather than computed from the data, so it does not move with the split and
        an attack undoes it exactly. Feature vectors are used as given (the identity)."""
        if not self.images:
            return Normalisation(mean=(0.0,), std=(1.0,))
        channels = self.x.shape[1]
        return Normalisation(mean=(0.5,) * channels, std=(0.5,) * channels)

    def split(self, seed: int, test_fraction: float) -> _Raw:
        """The test pair the user gave, else a stratified split drawn from `seed` holding out
        `test_fraction` of each class (as the offline sets); DataError when a class is too small
        to be split."""
        if self.x_test is not None and self.y_test is not None:
            return _Raw(self.x, self.y, self.x_test, self.y_test, self.class_names)
        from sklearn.model_selection import train_test_split

        try:
            train, test = train_test_split(np.arange(len(self.y)), test_size=test_fraction, stratify=self.y,
                                           random_state=seed)
        except ValueError as error:
            raise DataError(f"dataset {self.name!r}: cannot hold out test_fraction {test_fraction} of every class "
                            f"({error}); give more images per class, change test_fraction or give x_test and y_test"
                            ) from None
        return _Raw(self.x[train], self.y[train], self.x[test], self.y[test], self.class_names)


def user_source(name: str, *, path: str | Path | None = None, size: tuple[int, int] | None = None,
                loader: Callable[[], Any] | None = None) -> _UserSource:
    """A user's data read and checked: an image folder or an .npz archive at `path`, or what
    `loader` returns (`name` is then its import path); DataError, one line, naming what is wrong."""
    if is_loader(name):
        if loader is None:
            raise ValueError(f"dataset {name!r} is a loader: pass the function it names")
        return _loader_source(name, loader)
    if path is None:
        raise DataError(f"dataset {name!r}: no path given (the {'image folder' if name == 'folder' else '.npz file'} "
                        "to read)")
    where = _root(name, path)
    return _folder_source(Path(where), size) if name == "folder" else _npz_source(Path(where))


def data_content(name: str, *, path: str | Path | None = None, size: tuple[int, int] | None = None,
                 loader: Callable[[], Any] | None = None) -> Content:
    """The source and hash of a user's data as it is now (`user_source`), what a cell pins."""
    return user_source(name, path=path, size=size, loader=loader).content


def _data_budget(name: str, nbytes: int, what: str) -> None:
    """DataError when `nbytes` of a user's data are over the `data_mb` limit."""
    reason = exceeded("data_mb", -(-nbytes // 2**20))
    if reason:
        raise DataError(f"dataset {name!r}: {what} is {nbytes:,} bytes: {reason}")


def _memory_budget(name: str, values: int, what: str) -> None:
    """DataError when `values` float32 inputs (what a dataset's tensors hold) are over `memory`."""
    reason = exceeded("memory", -(-values * 4 // 2**20))
    if reason:
        raise DataError(f"dataset {name!r}: {what} as float32 inputs take {values * 4:,} bytes: {reason}")


def _image_files(root: Path) -> list[tuple[str, list[tuple[str, int]]]]:
    """Each class folder of `root` (sorted by name) with its image files (relative path, bytes),
    sorted, found without following any link: a link anywhere below `root` is a DataError naming
    it, since reading through it would read what lies outside the folder. Hidden entries (a name
    starting with '.') are passed over; so are files that are not images (`IMAGE_SUFFIXES`)."""
    if not root.exists():
        raise DataError(f"dataset 'folder': no folder {root}")
    if not root.is_dir():
        raise DataError(f"dataset 'folder': {root} is not a folder (give the folder holding one sub-folder per "
                        "class)")
    classes: list[tuple[str, list[tuple[str, int]]]] = []
    visited = [0]
    for entry in _entries(root, visited):
        if entry.is_dir(follow_symlinks=False):
            classes.append((entry.name, _images_below(root, Path(entry.path), visited)))
    if not classes:
        raise DataError(f"dataset 'folder': {root} holds no class sub-folder (the layout is one sub-folder per class, "
                        "holding that class's images)")
    for name, files in classes:
        if not files:
            raise DataError(f"dataset 'folder': class folder {root / name} holds no image "
                            f"({', '.join(IMAGE_SUFFIXES)})")
    return classes


def _entries(folder: Path, visited: list[int]) -> list[os.DirEntry[str]]:
    """The entries of `folder` other than hidden ones, sorted by name; DataError at a link, or
    when more entries are visited in all than the `records` limit."""
    try:
        entries = sorted((entry for entry in os.scandir(folder) if not entry.name.startswith(".")),
                         key=lambda entry: entry.name)
    except OSError as error:
        raise DataError(f"dataset 'folder': cannot read folder {folder} ({error.strerror or error})") from None
    visited[0] += len(entries)
    reason = exceeded("records", visited[0])
    if reason:
        raise DataError(f"dataset 'folder': {folder} and the folders before it hold {visited[0]:,} entries: {reason}")
    for entry in entries:
        if entry.is_symlink():
            raise DataError(f"dataset 'folder': {entry.path} is a symbolic link; privaudit follows no link in a data "
                            "folder (it could lead outside it): copy the file in or remove the link")
    return entries


def _images_below(root: Path, folder: Path, visited: list[int]) -> list[tuple[str, int]]:
    """The image files in `folder` and its sub-folders, as (path relative to `root`, bytes)."""
    found: list[tuple[str, int]] = []
    for entry in _entries(folder, visited):
        if entry.is_dir(follow_symlinks=False):
            found += _images_below(root, Path(entry.path), visited)
        elif entry.is_file(follow_symlinks=False) and entry.name.lower().endswith(IMAGE_SUFFIXES):
            found.append((Path(entry.path).relative_to(root).as_posix(), entry.stat(follow_symlinks=False).st_size))
    return found


def _folder_source(root: Path, size: tuple[int, int] | None) -> _UserSource:
    """An ImageFolder read and checked: class names are the sub-folders' names, sorted, and the
    labels their positions; the hash is a SHA-256 over every image's relative path and bytes in
    that order. Bounded before anything is decoded: the files' bytes by `data_mb`, the images by
    `records`, their float32 pixels by `memory`."""
    classes = _image_files(root)
    files = [(label, relative, nbytes) for label, (_, listed) in enumerate(classes) for relative, nbytes in listed]
    reason = exceeded("records", len(files))
    if reason:
        raise DataError(f"dataset 'folder': {root} holds {len(files):,} images: {reason}")
    _data_budget("folder", sum(nbytes for _, _, nbytes in files), f"{root}'s {len(files):,} images")
    digest = hashlib.sha256()
    blobs = []
    for _, relative, nbytes in files:
        try:
            blob = read_regular(root / relative, nbytes, "image", follow=False)
        except (FileNotFoundError, PrivauditError) as error:
            raise DataError(f"dataset 'folder': image {root / relative} cannot be read ({error}); was the folder "
                            "changed while it was read?") from None
        digest.update(f"{relative}\0{len(blob)}\0".encode())
        digest.update(blob)
        blobs.append(blob)
    sha256 = digest.hexdigest()
    key = (sha256, size)
    if key not in _DECODED:
        labels = np.array([label for label, _, _ in files], dtype=np.int64)
        x = _decoded(root, [relative for _, relative, _ in files], blobs, size)
        content = Content(f"image folder {root}: {len(files):,} images of {x.shape[2]}×{x.shape[3]} pixels "
                          f"({'grayscale' if x.shape[1] == 1 else 'RGB'}) in {len(classes)} classes", sha256)
        source = _UserSource("folder", _frozen(x), _frozen(labels), None, None, tuple(n for n, _ in classes), content)
        _checked_classes(source.name, [("labels", labels)])
        while len(_DECODED) >= _DECODED_KEPT:
            _DECODED.pop(next(iter(_DECODED)))
        _DECODED[key] = source
    return _DECODED[key]


def _decoded(root: Path, names: list[str], blobs: list[bytes], size: tuple[int, int] | None) -> np.ndarray:
    """uint8 pixels [n, C, H, W] of the images: one channel when every image is grayscale, else
    RGB (a grayscale image repeated, an alpha channel dropped); each resized to `size` (height,
    width; bilinear, anti-aliased) when given, else all must share one size (a DataError names the
    first that does not). Headers are read first, so the `memory` limit is checked before any
    image is decoded."""
    from PIL import Image

    images = [_opened(root / name, blob) for name, blob in zip(names, blobs)]
    gray = all(image.mode in _GRAY_MODES for image in images)
    height, width = size if size is not None else (images[0].height, images[0].width)
    if size is None:
        for name, image in zip(names, images):
            if (image.height, image.width) != (height, width):
                raise DataError(f"dataset 'folder': image {root / name} is {image.height}×{image.width} pixels "
                                f"(height × width), not {height}×{width} like {root / names[0]}; give all images one "
                                "size or set size = [height, width] to resize them")
    channels = 1 if gray else 3
    _memory_budget("folder", len(images) * channels * height * width, f"{len(images):,} images of {channels}×"
                   f"{height}×{width}")
    x = np.empty((len(images), channels, height, width), dtype=np.uint8)
    for index, (name, image) in enumerate(zip(names, images)):
        try:
            image = image.convert("L" if gray else "RGB")
            if (image.height, image.width) != (height, width):
                image = image.resize((width, height), Image.Resampling.BILINEAR)
            pixels = np.asarray(image, dtype=np.uint8)
        except (OSError, ValueError, SyntaxError) as error:
            raise DataError(f"dataset 'folder': cannot read image {root / name} ({error})") from None
        x[index] = pixels[None] if gray else pixels.transpose(2, 0, 1)
    return x


def _opened(path: Path, blob: bytes) -> Any:
    """The PIL image of `blob`, its header read (not yet its pixels); DataError naming `path` when
    it is no image PIL reads, holds more than 8 bits a channel, or claims more pixels than PIL's
    decompression-bomb bound."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(blob))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise DataError(f"dataset 'folder': cannot read image {path} ({error})") from None
    if image.mode not in _EIGHT_BIT_MODES:
        raise DataError(f"dataset 'folder': image {path} has mode {image.mode} (more than 8 bits a channel); privaudit "
                        "reads 8-bit images: convert it, or give the arrays in an .npz")
    return image


def _npz_source(path: Path) -> _UserSource:
    """An .npz archive's arrays (`ARRAYS`), read without pickle (an object array is refused, as
    code would run to read it); the archive's bytes are bounded by `data_mb` before reading, and
    its arrays' uncompressed sizes before loading them. The hash is a SHA-256 of the file."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DataError(f"dataset 'npz': no file {path}") from None
    except OSError as error:
        raise DataError(f"dataset 'npz': {path} cannot be read ({error.strerror or error})") from None
    _data_budget("npz", size, str(path))
    try:
        blob = read_regular(path, max(size, 1), "data file")
    except (FileNotFoundError, PrivauditError) as error:
        raise DataError(f"dataset 'npz': {error}") from None
    try:
        archive = np.load(io.BytesIO(blob), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise DataError(f"dataset 'npz': {path} is not an .npz archive ({error})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DataError(f"dataset 'npz': {path} holds one array (an .npy file), not an .npz archive of "
                        f"{', '.join(ARRAYS)} (np.savez)")
    unknown = sorted(set(archive.files) - set(ARRAYS))
    if unknown:
        raise DataError(f"dataset 'npz': {path} holds an array '{unknown[0]}'; an archive holds {', '.join(ARRAYS)} "
                        "(the test pair optional)")
    _data_budget("npz", sum(info.file_size for info in archive.zip.infolist()), f"{path}'s arrays uncompressed")
    arrays = {}
    for key in archive.files:
        try:
            arrays[key] = archive[key]
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
            raise DataError(f"dataset 'npz': array {key} of {path} cannot be read ({error})") from None
    source = f"npz file {path}"
    return _arrays_source("npz", source, arrays, hashlib.sha256(blob).hexdigest())


def _loader_source(name: str, loader: Callable[[], Any]) -> _UserSource:
    """What a loader returns — (x_train, y_train), (x_train, y_train, x_test, y_test) or a dict of
    `ARRAYS` — as numpy arrays or torch tensors, checked like an archive's; the hash is a SHA-256
    over each array's name, dtype, shape and bytes, so it names the data whatever produced them."""
    try:
        returned = loader()
    except Exception as error:  # noqa: BLE001 - a loader's failure is the user's code, reported on one line
        raise DataError(f"dataset {name!r}: the loader raised {type(error).__name__}: {error}") from None
    if isinstance(returned, dict):
        unknown = sorted(str(key) for key in returned if key not in ARRAYS)
        if unknown:
            raise DataError(f"dataset {name!r}: the loader returned a key '{unknown[0]}'; it returns "
                            f"{', '.join(ARRAYS)} (the test pair optional)")
        given = dict(returned)
    elif isinstance(returned, (tuple, list)) and len(returned) in (2, 4):
        given = dict(zip(ARRAYS, returned))
    else:
        raise DataError(f"dataset {name!r}: the loader returned {_a(returned)}; it returns (x_train, y_train), "
                        "(x_train, y_train, x_test, y_test) or a dict of them")
    arrays = {key: _array(name, key, value) for key, value in given.items()}
    _data_budget(name, sum(array.nbytes for array in arrays.values()), "the loader's arrays")
    digest = hashlib.sha256()
    for key in ARRAYS:
        if key in arrays:
            digest.update(f"{key}\0{arrays[key].dtype.str}\0{arrays[key].shape}\0".encode())
            digest.update(np.ascontiguousarray(arrays[key]).tobytes())
    return _arrays_source(name, f"loader {name}", arrays, digest.hexdigest())


def _a(value: Any) -> str:
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def _array(name: str, key: str, value: Any) -> np.ndarray:
    """A loader's array or tensor as a numpy array (a tensor's copy on the CPU)."""
    if isinstance(value, Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    raise DataError(f"dataset {name!r}: the loader's {key} is {_a(value)}, not a numpy array or torch tensor")


def _arrays_source(name: str, source: str, arrays: dict[str, np.ndarray], sha256: str) -> _UserSource:
    """Arrays checked in one line each: x_train and y_train present, the test pair both or
    neither; inputs [n, features] (used as given) or images [n, C, H, W] (uint8, or floats in
    [0, 1]), finite, one input shape; labels [n] of integers from 0, at least two classes."""
    for key in ("x_train", "y_train"):
        if key not in arrays:
            raise DataError(f"dataset {name!r}: {source} gives no {key}")
    if ("x_test" in arrays) != ("y_test" in arrays):
        given, missing = ("x_test", "y_test") if "x_test" in arrays else ("y_test", "x_test")
        raise DataError(f"dataset {name!r}: {source} gives {given} without {missing}: give both or neither")
    count = sum(len(arrays[key]) for key in ("y_train", "y_test") if key in arrays and arrays[key].ndim)
    reason = exceeded("records", count)
    if reason:
        raise DataError(f"dataset {name!r}: {source} holds {count:,} records: {reason}")
    inputs = {key: _inputs(name, key, arrays[key]) for key in ("x_train", "x_test") if key in arrays}
    labels = {key: _labels(name, key, arrays[key]) for key in ("y_train", "y_test") if key in arrays}
    for part in ("train", "test"):
        if f"x_{part}" in inputs and len(inputs[f"x_{part}"]) != len(labels[f"y_{part}"]):
            raise DataError(f"dataset {name!r}: x_{part} holds {len(inputs[f'x_{part}']):,} inputs but y_{part} "
                            f"{len(labels[f'y_{part}']):,} labels")
    if "x_test" in inputs and inputs["x_test"].shape[1:] != inputs["x_train"].shape[1:]:
        raise DataError(f"dataset {name!r}: x_test's inputs are {inputs['x_test'].shape[1:]}, x_train's "
                        f"{inputs['x_train'].shape[1:]}: give both one shape")
    _memory_budget(name, sum(x.size for x in inputs.values()), "the inputs")
    classes = _checked_classes(name, list(labels.items()))
    content = Content(f"{source}: {len(labels['y_train']):,} training records of shape "
                      f"{tuple(inputs['x_train'].shape[1:])} in {classes} classes"
                      + (f", {len(labels['y_test']):,} test records" if "y_test" in labels else ""), sha256)
    return _UserSource(name, inputs["x_train"], labels["y_train"], inputs.get("x_test"), labels.get("y_test"),
                       tuple(str(label) for label in range(classes)), content)


def _inputs(name: str, key: str, x: np.ndarray) -> np.ndarray:
    """Inputs as the dataset stores them: uint8 pixels kept, floats as float32; DataError when
    their shape, dtype or values are not inputs."""
    if x.ndim not in (2, 4) or len(x) == 0:
        hint = " (add the channel axis: [n, 1, H, W])" if x.ndim == 3 else ""
        raise DataError(f"dataset {name!r}: {key} has shape {x.shape}; give feature vectors [n, features] or images "
                        f"[n, channels, height, width]{hint}, n at least 1")
    if x.dtype == np.uint8:
        return x if x.ndim == 4 else x.astype(np.float32)
    if not np.issubdtype(x.dtype, np.floating):
        raise DataError(f"dataset {name!r}: {key} has dtype {x.dtype}; give uint8 pixels or floats")
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        raise DataError(f"dataset {name!r}: {key} holds NaN or infinite values")
    if x.ndim == 4 and (x.min() < 0.0 or x.max() > 1.0):
        raise DataError(f"dataset {name!r}: {key} holds pixels from {float(x.min()):.4g} to {float(x.max()):.4g}; "
                        "give images as pixels in [0, 1] (or uint8): privaudit normalises them itself")
    return x


def _labels(name: str, key: str, y: np.ndarray) -> np.ndarray:
    """Class labels as int64; DataError when they are not one integer per record from 0."""
    if y.ndim != 1:
        raise DataError(f"dataset {name!r}: {key} has shape {y.shape}; give one class label per record, [n]")
    if not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"dataset {name!r}: {key} has dtype {y.dtype}; give integer class labels 0, 1, …")
    if len(y) and y.min() < 0:
        raise DataError(f"dataset {name!r}: {key} holds the label {int(y.min())}; class labels count from 0")
    return y.astype(np.int64)


def _checked_classes(name: str, labels: list[tuple[str, np.ndarray]]) -> int:
    """The number of classes the labels span (the largest label + 1); DataError when fewer than two."""
    classes = max(int(y.max()) + 1 for _, y in labels if len(y))
    if classes < 2:
        raise DataError(f"dataset {name!r}: the labels hold one class only; a classifier needs at least two")
    return classes


def partition(
    labels: np.ndarray,
    n_agents: int,
    kind: str = "iid",
    *,
    seed: int = 0,
    alpha: float = 0.5,
    min_size: int = 1,
    shards_per_agent: int = 2,
) -> list[np.ndarray]:
    """Split sample indices among agents: one sorted int64 index array per agent.

    The arrays cover every index exactly once and each holds at least `min_size` samples.
    `iid` deals a random permutation into near-equal parts; `dirichlet` gives each agent a share
    of every class drawn from Dirichlet(alpha), so small alpha means strong label skew; `shards`
    sorts by label and deals `shards_per_agent` contiguous shards to each agent, the pathological
    non-iid split of McMahan et al. All draws come from numpy's default_rng(seed).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {labels.shape}")
    if kind not in PARTITIONS:
        raise ValueError(f"unknown partition {kind!r} (choose from {', '.join(PARTITIONS)})")
    if not 1 <= n_agents <= len(labels):
        raise ValueError(f"n_agents must be between 1 and the {len(labels)} samples, got {n_agents}")
    if min_size < 1:
        raise ValueError(f"min_size must be at least 1, got {min_size}")
    if min_size * n_agents > len(labels):
        raise ValueError(
            f"min_size {min_size} is impossible: {n_agents} agents share only {len(labels)} samples"
        )
    rng = np.random.default_rng(seed)
    if kind == "iid":
        parts = np.array_split(rng.permutation(len(labels)), n_agents)
    elif kind == "dirichlet":
        parts = _dirichlet(labels, n_agents, rng, alpha, min_size)
    else:
        parts = _shards(labels, n_agents, rng, shards_per_agent)
    smallest = min(len(p) for p in parts)
    if smallest < min_size:
        raise ValueError(
            f"{kind} partition gives an agent only {smallest} samples, fewer than min_size {min_size}"
        )
    return [np.sort(p).astype(np.int64) for p in parts]


_DIRICHLET_TRIES = 100


def _dirichlet(
    labels: np.ndarray, n_agents: int, rng: np.random.Generator, alpha: float, min_size: int
) -> list[np.ndarray]:
    """Per-class Dirichlet shares, redrawn until every agent holds at least min_size samples."""
    if alpha <= 0:
        raise ValueError(f"dirichlet alpha must be positive, got {alpha}")
    by_class = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    for _ in range(_DIRICHLET_TRIES):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_agents)]
        for members in by_class:
            shares = rng.dirichlet(np.full(n_agents, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(members)).astype(np.int64)
            for agent, chunk in enumerate(np.split(rng.permutation(members), cuts)):
                parts[agent].append(chunk)
        merged = [np.concatenate(chunks) for chunks in parts]
        if min(len(p) for p in merged) >= min_size:
            return merged
    raise ValueError(
        f"dirichlet partition: no draw in {_DIRICHLET_TRIES} tries gave all {n_agents} agents "
        f"at least {min_size} samples (alpha {alpha}); raise alpha or lower min_size"
    )


def _shards(
    labels: np.ndarray, n_agents: int, rng: np.random.Generator, shards_per_agent: int
) -> list[np.ndarray]:
    """Label-sorted indices cut into equal shards, shards_per_agent random shards per agent."""
    n_shards = n_agents * shards_per_agent
    if shards_per_agent < 1 or n_shards > len(labels):
        raise ValueError(
            f"shards_per_agent {shards_per_agent} is impossible: {n_agents} agents need "
            f"{n_shards} shards of at least one of the {len(labels)} samples"
        )
    shards = np.array_split(np.argsort(labels, kind="stable"), n_shards)
    order = rng.permutation(n_shards).reshape(n_agents, shards_per_agent)
    return [np.concatenate([shards[s] for s in row]) for row in order]
