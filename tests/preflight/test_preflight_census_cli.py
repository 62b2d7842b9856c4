"""`tracker preflight DIR` (the installed executable, as a process) on remote-code model directories.

1. THUDM/chatglm2-6b as the corpus holds it (config.json, pytorch_model.bin.index.json) plus the
   stand-in modeling code of `data/remote/`: the LoRA answer is read from the index's names and
   the code, and printed per target with its layer kinds and adapter parameters.
2. A two-layer remote-code model with a real safetensors file (header and zero-filled data written
   here): a projection whose width the code computes by a method call (outside the evaluator's
   whitelist) is sized from the header's shape, and a module the code builds through a function
   it does not show is named in the answer.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

from tests.preflight.test_preflight_census_lora import CONFIGS, CORPUS, REMOTE

TRACKER = Path(sys.executable).with_name("tracker")


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKER_", "HF_"))}
    env["TRACKER_STATE_DIR"] = str(tmp_path / "state")
    return subprocess.run(
        [str(TRACKER), "preflight", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_chatglm2_directory_prints_what_each_target_adapts(tmp_path: Path) -> None:
    model = tmp_path / "chatglm2-6b"
    model.mkdir()
    (model / "config.json").write_bytes((CONFIGS / "THUDM__chatglm2-6b.json").read_bytes())
    (model / "modeling_chatglm.py").write_bytes(
        (REMOTE / "chatglm2-6b.modeling_chatglm.py.txt").read_bytes()
    )
    index = "pytorch_model.bin.index.json"
    (model / index).write_bytes((CORPUS / "THUDM__chatglm2-6b" / index).read_bytes())
    done = _run(tmp_path, str(model))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "LoRA targets (rank 16):" in lines
    # 28 layers × (query_key_value, dense, dense_h_to_4h, dense_4h_to_h) + output_layer
    assert (
        "  all-linear: 113 modules (attention.full 56, mlp.dense 56, other 1); "
        "30,752,768 adapter parameters"
    ) in lines
    assert "  q_proj: 0 modules (nothing); 0 adapter parameters" in lines
    assert any("PEFT's all-linear excludes no output head" in ln for ln in lines)
    data = json.loads(_run(tmp_path, str(model), "--json").stdout)
    lora = data["lora"]
    assert lora["targets"]["all-linear"]["other"] == {
        "modules": 1,
        "adapter_params": 16 * (4096 + 65024),
    }
    assert data["lora_error"] is None


CODE = """
from torch import nn
from transformers import PreTrainedModel


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.q_proj = nn.Linear(config.hidden_size, self.width(config), bias=False)
        self.gate = make_gate(config)

    def width(self, config):
        return 2 * config.hidden_size


class TinyForCausalLM(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([Block(config) for _ in range(config.num_layers)])
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
"""


def _safetensors(path: Path, tensors: dict[str, tuple[int, ...]]) -> None:
    """A safetensors file: 8-byte header length, JSON header, zero-filled BF16 data."""
    header: dict[str, object] = {}
    offset = 0
    for name, shape in tensors.items():
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def tiny_config(layers: int) -> dict[str, object]:
    """The config of the tiny remote-code model (CODE) with `layers` layers."""
    return {
        "model_type": "tiny",
        "architectures": ["TinyForCausalLM"],
        "auto_map": {"AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM"},
        "hidden_size": 16,
        "vocab_size": 32,
        "num_layers": layers,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "intermediate_size": 32,
    }


def test_header_shapes_size_what_the_code_does_not(tmp_path: Path) -> None:
    model = tmp_path / "tiny"
    model.mkdir()
    config = tiny_config(2)
    (model / "config.json").write_text(json.dumps(config))
    (model / "modeling_tiny.py").write_text(CODE)
    tensors: dict[str, tuple[int, ...]] = {"embed.weight": (32, 16), "lm_head.weight": (32, 16)}
    for i in range(2):
        tensors[f"layers.{i}.q_proj.weight"] = (32, 16)
        tensors[f"layers.{i}.gate.weight"] = (4, 16)
    _safetensors(model / "model.safetensors", tensors)
    done = _run(tmp_path, str(model), "--json")
    assert done.returncode == 0, done.stderr
    lora = json.loads(done.stdout)["lora"]
    # q_proj: [out 32, in 16] from the header, 2 layers: 16 × (16 + 32) each
    assert lora["targets"]["q_proj"] == {
        "other": {"modules": 2, "adapter_params": 2 * 16 * (16 + 32)}
    }
    # `gate` is built by a function the code does not show: all-linear is not resolved, and why
    assert lora["unresolved"] == {
        "all-linear": "not understood: `gate` (built by make_gate(), which the code does not show)"
    }
    assert "all-linear" not in lora["targets"]
    text = _run(tmp_path, str(model)).stdout.splitlines()
    assert "  q_proj: 2 modules (other 2); 1,536 adapter parameters" in text
    assert (
        "  all-linear: not resolved (not understood: `gate` (built by make_gate(), which the "
        "code does not show))"
    ) in text
