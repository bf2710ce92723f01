import pytest
import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import parse_input


def test_parse_input_shape_dtype_and_high():
    s = parse_input("ids=int64[8,512]<32000")
    assert (s.name, s.shape, s.dtype, s.high) == ("ids", (8, 512), torch.int64, 32000)
    assert parse_input(" x = float32[32, 3, 224, 224] ").shape == (32, 3, 224, 224)
    assert parse_input("s=bf16[]").shape == ()


@pytest.mark.parametrize("text,fragment", [
    ("x=float32(3,4)", "does not parse"),
    ("x=floaty[3]", "unknown dtype 'floaty'"),
    ("x=float32[3,0]", ">= 1"),
    ("x=float32[3]<5", "integer inputs only"),
])
def test_bad_inputs_name_the_problem(text, fragment):
    with pytest.raises(MemgraphError, match=None) as e:
        parse_input(text)
    assert fragment in str(e.value) and text in str(e.value)


def test_made_tensors_respect_high():
    s = parse_input("y=int64[1000]<3")
    t = s.make("cpu", torch.Generator().manual_seed(0))
    assert int(t.max()) <= 2 and int(t.min()) >= 0
    assert s.make("meta").device.type == "meta"
