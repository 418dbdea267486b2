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
    synthetic_iid,
)
from protocols.training.fedplus import (
    FEDPLUS_ALGORITHMS,
    FedPlusConfig,
    FedPlusResult,
    FedPlusTrainer,
    train_fedplus,
)
from protocols.training.fedplus_data import (
    outlier_parties,
    personalized_regression,
)
from protocols.training.ffgb import (
    FFGB_VARIANTS,
    FFGBConfig,
    FFGBResult,
    FFGBTrainer,
    FunctionalModel,
    train_ffgb,
)
from protocols.training.homogeneity import (
    homogeneity_split,
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
from protocols.training.trainer_config import (
    ALGORITHMS,
    TrainerConfig,
)
from protocols.training.trainer_results import (
    ErrorSummary,
    RoundRecord,
    TrainingResult,
)
from protocols.training.trainers import (
    FederatedTrainer,
    train,
)
from protocols.training.weak_learners import (
    FourierRidgeLearner,
    InterpolatingLearner,
    MLPRegressorLearner,
    WeakLearner,
)

__all__ = [
    "ALGORITHMS",
    "CORRUPTION_KINDS",
    "DATASET_NAMES",
    "FASHION_MNIST_DIR",
    "FEDPLUS_ALGORITHMS",
    "FFGB_VARIANTS",
    "MLP",
    "Classifier",
    "ClientData",
    "Corruption",
    "CorruptionKind",
    "CorruptionPlan",
    "DatasetNotAvailableError",
    "DirichletSplit",
    "ErrorSummary",
    "FFGBConfig",
    "FFGBResult",
    "FFGBTrainer",
    "FedPlusConfig",
    "FedPlusResult",
    "FedPlusTrainer",
    "FederatedDataset",
    "FederatedTrainer",
    "FourierRidgeLearner",
    "FunctionalModel",
    "IIDSplit",
    "InterpolatingLearner",
    "LinearRegression",
    "LocalSGDStats",
    "MLPRegressorLearner",
    "Model",
    "MultinomialLogisticRegression",
    "RoundRecord",
    "ShardSplit",
    "Split",
    "TrainerConfig",
    "TrainingResult",
    "WeakLearner",
    "choose_test_clients",
    "corrupt_client",
    "corrupt_dataset",
    "corrupt_updates",
    "corrupted_prefix",
    "dataset_available",
    "digits",
    "fashion_mnist",
    "flip_labels",
    "homogeneity_split",
    "load_dataset",
    "mnist_5k",
    "negate_images",
    "omniscient_vector",
    "outlier_parties",
    "partition_indices",
    "personalized_regression",
    "rotate_images",
    "select_corrupted_clients",
    "synthetic",
    "synthetic_iid",
    "train",
    "train_fedplus",
    "train_ffgb",
    "train_test_indices",
]
