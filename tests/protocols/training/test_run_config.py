"""One config family: the fields every trainer shares are validated and normalised one way."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpquantile import ZCDP, ZCDPAccountant
from protocols.training.fedplus import FedPlusConfig
from protocols.training.ffgb import FFGBConfig
from protocols.training.trainer_config import RunConfig, TrainerConfig

CONFIGS = (TrainerConfig, FedPlusConfig, FFGBConfig)
# Fed+'s default (FedGeoMed+ by Moreau steps) has no noisy release: DP runs pick FedAvg+.
DP_READY: dict[type[RunConfig], dict[str, Any]] = {FedPlusConfig: {"algorithm": "fedavg+"}}

# (field, bad value, error type, message fragment): every config must refuse each the same way.
BAD_SHARED = [
    ("rounds", 0, ValueError, "rounds must be an integer >= 1"),
    ("rounds", 2.0, TypeError, "rounds must be an integer"),
    ("clients_per_round", 1, ValueError, "clients_per_round must be an integer >= 2"),
    ("local_steps", 0, ValueError, "local_steps must be an integer >= 1"),
    ("bits", 7, ValueError, "bits must be an integer >= 8"),
    ("bits", 65, ValueError, "bits must lie in [8, 64]"),
    ("secure", 1, TypeError, "secure must be a bool"),
    ("dropout", 1.0, ValueError, "dropout must be a number in [0, 1)"),
    ("dropout", math.nan, ValueError, "dropout must be a number in [0, 1)"),
    ("seed", None, TypeError, "seed must be an int"),
    ("seed", -1, ValueError, "seed"),
    ("noise_seed", -1, ValueError, "seed"),
    ("blas_threads", 0, ValueError, "blas_threads must be an integer >= 1"),
    ("epsilon", 0.0, ValueError, "epsilon"),
    ("epsilon", math.inf, ValueError, "epsilon"),
    ("delta", 0.0, ValueError, "delta must be a number in (0, 1)"),
    ("delta", 1.0, ValueError, "delta must be a number in (0, 1)"),
]


@pytest.mark.parametrize("kind", CONFIGS, ids=lambda k: k.__name__)
@pytest.mark.parametrize(("name", "value", "error", "match"), BAD_SHARED)
def test_every_config_refuses_a_bad_shared_field_alike(
    kind: type[RunConfig], name: str, value: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=re.escape(match)):
        kind(**DP_READY.get(kind, {}), **{name: value})


@pytest.mark.parametrize("kind", CONFIGS, ids=lambda k: k.__name__)
def test_numpy_scalars_are_stored_as_python_numbers(kind: type[RunConfig]) -> None:
    # Fed+ and FFGB used to check these and keep the caller's numpy scalar (their JSON record
    # then held np.int64); every config now stores what it validated.
    config = kind(
        **DP_READY.get(kind, {}),
        rounds=np.int64(3),
        bits=np.int64(16),
        seed=np.int64(5),
        noise_seed=np.int64(6),
        blas_threads=np.int64(2),
        delta=np.float64(1e-6),
    )
    for name, expected in [("rounds", 3), ("bits", 16), ("seed", 5), ("noise_seed", 6)]:
        value = getattr(config, name)
        assert type(value) is int and value == expected, name
    assert type(config.blas_threads) is int and type(config.delta) is float


@pytest.mark.parametrize("kind", CONFIGS, ids=lambda k: k.__name__)
def test_with_changes_revalidates_and_keeps_the_type(kind: type[RunConfig]) -> None:
    config = kind()
    changed = config.with_changes(rounds=4)
    assert type(changed) is kind and changed.rounds == 4
    with pytest.raises(ValueError, match="bits must lie"):
        config.with_changes(bits=80)


@settings(deadline=None, max_examples=40)  # each conversion is a bisection
@given(
    epsilon=st.floats(min_value=0.01, max_value=50.0),
    delta=st.floats(min_value=1e-12, max_value=0.5),
)
def test_rho_budget_is_one_conversion_for_every_config(epsilon: float, delta: float) -> None:
    budgets = {
        kind.__name__: kind(**DP_READY.get(kind, {}), epsilon=epsilon, delta=delta).rho_budget
        for kind in CONFIGS
    }
    assert len(set(budgets.values())) == 1, budgets
    (rho,) = set(budgets.values())
    assert rho is not None and rho > 0

    # The accountant's own conversion (CKS20 Cor. 13) of ρ is within ε, and of 1.000001·ρ not.
    def converted(value: float) -> float:
        return ZCDPAccountant().compose(ZCDP(value)).epsilon(delta)

    assert converted(rho) <= epsilon < converted(rho * (1 + 1e-6))


@pytest.mark.parametrize("kind", CONFIGS, ids=lambda k: k.__name__)
def test_to_dict_records_every_field(kind: type[RunConfig]) -> None:
    record: dict[str, Any] = kind(**DP_READY.get(kind, {}), epsilon=2.0).to_dict()
    assert set(record) == set(kind.__dataclass_fields__)
    assert record["epsilon"] == 2.0 and record["secure"] is True
