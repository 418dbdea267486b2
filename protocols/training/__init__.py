"""Training harness: numpy models, federated datasets and splits, corruption models.

Models expose their parameters as one flat float64 vector (``get_parameters`` /
``set_parameters``) so an update can go through a secure weighted average; datasets hold training
clients with their own held-out splits and test clients never seen in training; corruption models
follow RFA (Pillutla, Kakade, Harchaoui), with the corrupted fraction counted in data points.
"""

from __future__ import annotations

from protocols.training.corruption import (
    CORRUPTION_KINDS,
    Corruption,
    CorruptionKind,
    CorruptionPlan,
    corrupt_client,
    corrupt_dataset,
    corrupt_updates,
    corrupted_prefix,
    flip_labels,
    negate_images,
    omniscient_vector,
    select_corrupted_clients,
)
from protocols.training.data import ClientData, FederatedDataset
from protocols.training.datasets import (
    DATASET_NAMES,
    FASHION_MNIST_DIR,
    DatasetNotAvailableError,
    dataset_available,
    digits,
    fashion_mnist,
    load_dataset,
    mnist_5k,
    synthetic,
)
from protocols.training.models import (
    MLP,
    Classifier,
    LinearRegression,
    LocalSGDStats,
    Model,
    MultinomialLogisticRegression,
)
from protocols.training.partition import (
    DirichletSplit,
    IIDSplit,
    ShardSplit,
    Split,
    choose_test_clients,
    partition_indices,
    rotate_images,
    train_test_indices,
)

__all__ = [
    "CORRUPTION_KINDS",
    "DATASET_NAMES",
    "FASHION_MNIST_DIR",
    "MLP",
    "Classifier",
    "ClientData",
    "Corruption",
    "CorruptionKind",
    "CorruptionPlan",
    "DatasetNotAvailableError",
    "DirichletSplit",
    "FederatedDataset",
    "IIDSplit",
    "LinearRegression",
    "LocalSGDStats",
    "Model",
    "MultinomialLogisticRegression",
    "ShardSplit",
    "Split",
    "choose_test_clients",
    "corrupt_client",
    "corrupt_dataset",
    "corrupt_updates",
    "corrupted_prefix",
    "dataset_available",
    "digits",
    "fashion_mnist",
    "flip_labels",
    "load_dataset",
    "mnist_5k",
    "negate_images",
    "omniscient_vector",
    "partition_indices",
    "rotate_images",
    "select_corrupted_clients",
    "synthetic",
    "train_test_indices",
]
