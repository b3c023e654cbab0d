"""What an image's config says it holds (bisect_ngc/images/image_config.py): the labels
and variables of NGC's PyTorch images as they are written, read into components, and the
difference between two images."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from bisect_ngc.images.image_config import COMPONENTS, DEFAULTS, Fact, diff, facts


def config(env: dict[str, str], labels: dict[str, str] | None = None) -> dict:
    return {"architecture": "amd64", "os": "linux",
            "config": {"Env": [f"{k}={v}" for k, v in env.items()], "Labels": labels or {}}}


# The forms NGC's images write (24.01-25.12): four-part CUDA versions, torch's local
# version with the upstream commit, TE with and without a commit, Triton with a commit.
FORMS = [
    ("PYTORCH_BUILD_VERSION", "2.5.0a0+b465a5843b", "torch", "b465a5843b"),
    ("PYTORCH_BUILD_VERSION", "2.8.0a0+5228986c39", "torch", "5228986c39"),
    ("PYTORCH_VERSION", "2.3.0a0+ebedce2", "torch", "ebedce2"),
    ("PYTORCH_BUILD_VERSION", "2.9.0a0+gitb1e0f0c", "torch", "b1e0f0c"),
    ("TRANSFORMER_ENGINE_VERSION", "1.10", "transformer_engine", ""),
    ("TRANSFORMER_ENGINE_VERSION", "1.11.0+c27ee60", "transformer_engine", "c27ee60"),
    ("TRANSFORMER_ENGINE_VERSION", "2.1.0+rc1", "transformer_engine", ""),
    ("PYTORCH_TRITON_VERSION", "3.0.0+dedb7bdf3", "triton", "dedb7bdf3"),
    ("PYTORCH_TRITON_VERSION", "3.3.0", "triton", ""),
    ("CUDA_VERSION", "12.6.1.006", "cuda", ""),
    ("CUDA_DRIVER_VERSION", "560.35.03", "cuda driver", ""),
    ("CUBLAS_VERSION", "12.6.3.1", "cublas", ""),
    ("CUDNN_VERSION", "9.4.0.58", "cudnn", ""),
    ("CUDNN_FRONTEND_VERSION", "1.6.1", "cudnn-frontend", ""),
    ("CUSPARSELT_VERSION", "0.6.2.3", "cusparselt", ""),
    ("NCCL_VERSION", "2.22.3", "nccl", ""),
    ("NVSHMEM_VERSION", "3.2.5", "nvshmem", ""),
    ("HPCX_VERSION", "2.20", "hpc-x", ""),
    ("OPENUCX_VERSION", "1.17.0", "ucx", ""),
    ("TRT_VERSION", "10.4.0.26", "tensorrt", ""),
    ("NVIDIA_PYTORCH_VERSION", "24.09", "ngc release", ""),
    # seen in 24.01's config (apptainer inspect of nvcr.io/nvidia/pytorch:24.01-py3)
    ("PYTORCH_BUILD_VERSION", "2.2.0a0+81ea7a4", "torch", "81ea7a4"),
    ("CUDNN_VERSION", "8.9.7.29+cuda12.2", "cudnn", ""),
    ("TRT_VERSION", "8.6.1.6+cuda12.0.1.011", "tensorrt", ""),
    ("HPCX_VERSION", "2.16rc4", "hpc-x", ""),
    ("OPENMPI_VERSION", "4.1.5rc2", "open mpi", ""),
    ("TRANSFORMER_ENGINE_VERSION", "1.2", "transformer_engine", ""),
    ("CUDA_VERSION", "12.3.2.001", "cuda", ""),
    # 25.10 and later
    ("PYTORCH_BUILD_VERSION", "2.9.0a0+145a3a7", "torch", "145a3a7"),
    ("PYTORCH_TRITON_VERSION", "3.4.0+gitc817b9b6", "triton", "c817b9b6"),
    ("TRANSFORMER_ENGINE_VERSION", "2.17", "transformer_engine", ""),
    ("CUDA_VERSION", "13.0.2.006", "cuda", ""),
    ("HPCX_VERSION", "2.50", "hpc-x", ""),
    ("AWS_OFI_NCCL_VERSION", "1.14.0", "aws-ofi-nccl", ""),
    ("NVFUSER_BUILD_VERSION", "f73ff1bc6a", "nvfuser", ""),
    ("TORCHAO_BUILD_VERSION", "+git18278f9b", "torchao", "18278f9b"),
    ("CCCL_VERSION", "13.3.3.4.1", "cccl", ""),
    # forms a review tried: upper-case hex, a date after '+', a trailing .nvYY.MM
    ("PYTORCH_BUILD_VERSION", "2.5.0a0+B465A5843B", "torch", "b465a5843b"),
    ("PYTORCH_BUILD_VERSION", "2.3.0+20240315", "torch", ""),
    ("PYTORCH_BUILD_VERSION", "2.5.0a0+b465a5843b.nv24.09", "torch", "b465a5843b"),
]

# 24.01's config as nvcr.io serves it (a subset, verbatim), and 25.10's.
NGC_24_01 = config({
    "CUDA_VERSION": "12.3.2.001", "CUDA_DRIVER_VERSION": "545.23.08", "NCCL_VERSION": "2.19.4",
    "CUBLAS_VERSION": "12.3.4.1", "CUDNN_VERSION": "8.9.7.29+cuda12.2", "TRTOSS_VERSION": "23.11",
    "TRANSFORMER_ENGINE_VERSION": "1.2", "HPCX_VERSION": "2.16rc4",
    "PYTORCH_BUILD_VERSION": "2.2.0a0+81ea7a4", "PYTORCH_VERSION": "2.2.0a0+81ea7a4",
    "NVIDIA_PYTORCH_VERSION": "24.01",
    "TORCH_CUDA_ARCH_LIST": "5.2 6.0 6.1 7.0 7.2 7.5 8.0 8.6 8.7 9.0+PTX",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1", "TORCH_CUDNN_V8_API_ENABLED": "1",
    "CUDA_MODULE_LOADING": "LAZY"},
    {"com.nvidia.cuda.version": "9.0", "com.nvidia.cudnn.version": "8.9.7.29+cuda12.2",
     "com.nvidia.nccl.version": "2.19.4", "com.nvidia.pytorch.version": "2.2.0a0+81ea7a4",
     "com.nvidia.build.ref": "3a8f39e58d71996b362a9358b971d42d695351fd"})
NGC_25_10 = config({
    "CUDA_VERSION": "13.0.2.006", "CUDA_DRIVER_VERSION": "580.95.05", "NCCL_VERSION": "2.27.7",
    "CUBLAS_VERSION": "13.1.0.3", "CUDNN_VERSION": "9.14.0.64", "CUDNN_FRONTEND_VERSION": "1.14.1",
    "NVSHMEM_VERSION": "3.4.5", "TRTOSS_VERSION": "", "TRANSFORMER_ENGINE_VERSION": "2.8",
    "HPCX_VERSION": "2.24.1", "PYTORCH_BUILD_VERSION": "2.9.0a0+145a3a7",
    "PYTORCH_VERSION": "2.9.0a0+145a3a7", "NVIDIA_PYTORCH_VERSION": "25.10",
    "TORCH_CUDA_ARCH_LIST": "8.0 8.6 9.0 10.0 11.0 12.0+PTX",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1", "CUDA_MODULE_LOADING": "LAZY",
    "TORCH_NCCL_USE_COMM_NONBLOCKING": "0", "PIP_CONSTRAINT": "/etc/pip/constraint.txt"},
    {"com.nvidia.cuda.version": "9.0", "com.nvidia.cudnn.version": "9.14.0.64",
     "com.nvidia.nccl.version": "2.27.7", "com.nvidia.pytorch.version": "2.9.0a0+145a3a7"})


def test_24_01_against_25_10_as_their_configs_say():
    rows = {r.name: (r.a, r.b) for r in diff(NGC_24_01, NGC_25_10)}
    assert rows["torch"] == ("2.2.0a0+81ea7a4", "2.9.0a0+145a3a7")
    assert rows["cuda"] == ("12.3.2.001", "13.0.2.006")       # never the label's 9.0
    assert rows["cudnn"] == ("8.9.7.29+cuda12.2", "9.14.0.64")
    assert rows["nvshmem"] == ("", "3.4.5") and rows["cudnn-frontend"] == ("", "1.14.1")
    assert rows["trtoss"] == ("23.11", "")                      # empty says nothing
    assert rows["TORCH_NCCL_USE_COMM_NONBLOCKING"] == ("", "0")
    assert rows["TORCH_CUDNN_V8_API_ENABLED"] == ("1", "")
    assert "CUDA_MODULE_LOADING" not in rows and "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE" not in rows
    assert facts(NGC_25_10)["torch"].commit == "145a3a7"


@pytest.mark.parametrize("name,value,component,commit", FORMS)
def test_each_variable_form_names_its_component_version_and_commit(name, value, component,
                                                                   commit):
    fact = facts(config({name: value}))[component]
    assert (fact.version, fact.source, fact.commit) == (value, f"env {name}", commit)


def test_a_variable_wins_over_a_label_and_a_label_fills_in():
    found = facts(config({"CUDNN_VERSION": "9.4.0.58"},
                         {"com.nvidia.cudnn.version": "9.4.0", "com.nvidia.nccl.version":
                          "2.22.3"}))
    assert found["cudnn"] == Fact("cudnn", "9.4.0.58", "env CUDNN_VERSION")
    assert found["nccl"] == Fact("nccl", "2.22.3", "label com.nvidia.nccl.version")


def test_the_build_version_wins_over_the_short_one():
    found = facts(config({"PYTORCH_VERSION": "2.5.0a0+b465a58",
                          "PYTORCH_BUILD_VERSION": "2.5.0a0+b465a5843b"}))
    assert found["torch"].commit == "b465a5843b"


def test_an_empty_value_says_nothing_and_an_unknown_version_variable_still_shows():
    found = facts(config({"TRANSFORMER_ENGINE_VERSION": "", "MY_LIB_VERSION": "4.2",
                          "PATH": "/usr/bin"}))
    assert "transformer_engine" not in found
    assert found["my-lib"] == Fact("my-lib", "4.2", "env MY_LIB_VERSION")
    assert set(found) == {"my-lib"}


def test_two_releases_differ_in_components_then_defaults():
    a = config({"CUDA_VERSION": "12.6.1.006", "NCCL_VERSION": "2.22.3",
                "TORCH_CUDA_ARCH_LIST": "5.2 6.0 6.1 7.0 7.2 7.5 8.0 8.6 8.7 9.0+PTX",
                "CUDA_MODULE_LOADING": "LAZY"})
    b = config({"CUDA_VERSION": "12.6.2.004", "NCCL_VERSION": "2.22.3",
                "TORCH_CUDA_ARCH_LIST": "7.5 8.0 8.6 9.0 10.0 12.0+PTX",
                "CUDA_MODULE_LOADING": "LAZY", "NVSHMEM_VERSION": "3.1.7"})
    assert [(r.name, r.a, r.b, r.kind) for r in diff(a, b)] == [
        ("cuda", "12.6.1.006", "12.6.2.004", "component"),
        ("nvshmem", "", "3.1.7", "component"),
        ("TORCH_CUDA_ARCH_LIST", "5.2 6.0 6.1 7.0 7.2 7.5 8.0 8.6 8.7 9.0+PTX",
         "7.5 8.0 8.6 9.0 10.0 12.0+PTX", "default")]


def test_a_docker_inspect_config_reads_the_same_as_a_registry_blob():
    blob = config({"NCCL_VERSION": "2.23.4"}, {"com.nvidia.cuda.version": "12.6.2.004"})
    inspected = {"Config": blob["config"]}          # the docker SDK's image.attrs
    assert facts(inspected) == facts(blob)


NAMES = st.sampled_from(sorted({n for c in COMPONENTS.values() for n in c.config if n.isupper()}
                               | set(DEFAULTS) | {"OTHER_VERSION", "PATH"}))
ENVS = st.dictionaries(NAMES, st.text("0123456789.+abcdef", min_size=1, max_size=12),
                       max_size=8)


@given(ENVS, ENVS)
def test_a_diff_is_empty_on_itself_and_swaps_its_columns_when_swapped(x, y):
    a, b = config(x), config(y)
    assert diff(a, a) == []
    assert [(r.name, r.b, r.a) for r in diff(b, a)] == [(r.name, r.a, r.b) for r in diff(a, b)]
    assert all(r.a != r.b for r in diff(a, b))


def test_quotes_are_not_part_of_a_value_and_a_null_label_says_nothing():
    found = facts({"config": {"Env": ['PYTORCH_BUILD_VERSION="2.5.0a0+b465a5843b"', "NOEQUALS"],
                              "Labels": {"com.nvidia.cudnn.version": None}}})
    assert found["torch"].version == "2.5.0a0+b465a5843b"
    assert found["torch"].commit == "b465a5843b" and "cudnn" not in found
