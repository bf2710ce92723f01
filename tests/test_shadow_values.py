"""Shadow values: data-dependent forward code (counting image tokens, masks, .item()) on meta.

The small integer inputs carry real values beside their meta tensors; floating-point work stays
valueless, and a value-dependent op on it fails with the op and module named.
"""

import pytest
import torch

from memgraph.errors import TraceError
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec, resolve
from memgraph.trace.record.recorder import Recorder
from memgraph.trace.shadow_values import ShadowValues
from memgraph.trace.tracer import trace_training
from tests.conftest import CONFIGS


def test_shadow_values_answer_value_dependent_ops():
    sv = ShadowValues()
    ids = torch.empty(2, 6, dtype=torch.long, device="meta")
    sv.attach(ids, torch.tensor([[1, 9, 9, 4, 5, 6], [1, 9, 3, 9, 9, 2]]))
    emb = torch.empty(2, 6, 4, device="meta")
    with sv:
        mask = ids == 9
        n = mask.sum()
        assert n.item() == 5 and int(n) == 5 and bool(n > 4)
        nz = mask.nonzero()
        assert nz.device.type == "meta" and nz.shape == (5, 2)
        assert sv.value(nz).tolist() == [[0, 1], [0, 2], [1, 1], [1, 3], [1, 4]]
        assert ids[1].tolist() == [1, 9, 3, 9, 9, 2]
        assert emb[mask].shape == (5, 4)  # boolean index into a valueless float tensor
        assert emb.masked_select(mask.unsqueeze(-1)).shape == (20,)
        assert torch.repeat_interleave(ids[0, :3]).shape == (1 + 9 + 9,)
        assert sv.value(torch.unique(ids)).tolist() == [1, 2, 3, 4, 5, 6, 9]
        assert max(ids[0, 1], ids[0, 3]).item() == 9
        assert torch.equal(ids, ids)
        # views and in-place ops keep the shadows right
        pos = torch.zeros(3, 2, 6, dtype=torch.long, device="meta")
        pos[:, 1, mask[1]] = torch.arange(3, device="meta").view(3, 1).expand(3, 3) + 10
        assert sv.value(pos)[:, 1].tolist() == [[0, 10, 0, 10, 10, 0], [0, 11, 0, 11, 11, 0], [0, 12, 0, 12, 12, 0]]
        v = ids.clone()
        v.view(-1)[0] = 7
        assert v[0, 0].item() == 7
        # torch.tensor(...) on meta never reaches the dispatcher: the companion mode shadows it
        assert sv.value(torch.tensor([n, n + 1], device="meta")).tolist() == [5, 6]
        # a write from a valueless tensor drops the shadows of every alias: never stale
        alias = v[0]
        v.copy_(torch.empty(2, 6, device="meta"))
        assert sv.value(v) is None and sv.value(alias) is None
        # floating-point work stays valueless; value-dependent ops on it fail as before
        assert sv.value(emb * 2) is None
        with pytest.raises(RuntimeError):
            emb.sum().item()  # a float value: no value on meta
        # a one-element bool test without a value is guessed True and counted (I-BERT's range checks)
        assert (emb.sum() > 0).item() is True and sv.guessed == 1
        with pytest.raises(NotImplementedError):
            torch.empty(3, dtype=torch.long, device="meta").nonzero()  # uninitialised: no values


def test_recorder_sees_answered_ops_once_with_their_outputs():
    sv = ShadowValues()
    ids = torch.empty(8, dtype=torch.long, device="meta")
    sv.attach(ids, torch.tensor([0, 3, 0, 3, 3, 1, 0, 3]))
    rec = Recorder(device_type="meta")
    with sv, rec:  # the recorder on top
        idx = (ids == 3).nonzero()
        count = (ids == 3).sum().item()
    # each op once, none of the CPU work on the shadows
    assert [o.op for o in rec.log.ops] == ["aten.eq.Scalar", "aten.nonzero.default", "aten.eq.Scalar",
                                       "aten.sum.default", "aten._local_scalar_dense.default"]
    assert count == 4 and idx.shape == (4, 1)
    nz = rec.log.ops[1]
    assert rec.log.storages[nz.allocated[0]].shape == (4, 1)


def test_value_dependent_op_without_values_names_op_and_module():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            return h[h > 0].sum()  # depends on float values: no shadow, must fail clearly

    spec = ModelSpec(name="net", source="callable", task="custom", factory=Net)
    with pytest.raises(TraceError, match=r"tracing failed at aten\.index\.Tensor in module 'the model's top level'"):
        trace_training(spec, TrainingOptions(inputs=("x=float32[2,4]",), target="cpu"))


def test_text_only_batches_carry_drawn_values():
    """Every integer input gets values drawn as the real run draws them ([0, vocab)), so model code that reads
    token ids or masks back runs; floating inputs never get values."""
    spec = resolve(str(CONFIGS / "tiny-llama.json"))
    opts = TrainingOptions(seq_len=16, target="cpu")
    batch_spec = spec.batch(opts, torch.float32)
    shadows = ShadowValues()
    _, kwargs = batch_spec.make("meta")
    assert shadows.attach_batch(batch_spec, ((), kwargs)) == 2  # input_ids and labels
    ids = shadows.value(kwargs["input_ids"])
    assert ids.shape == (1, 16) and 0 <= int(ids.min()) and int(ids.max()) < 1000  # tiny-llama's vocab_size


def test_fill_inputs_carry_their_value_and_lists_index_shadows():
    """attention_mask=int64[2,8]=1 is all ones on meta too; x[:, [-1, 0]] (transformers' padding check) keeps values."""
    from memgraph.model_spec.inputs import Batch, parse_input

    batch_spec = Batch((parse_input("attention_mask=int64[2,8]=1"), parse_input("ids=int64[2,8]<5")), {})
    _, kwargs = batch_spec.make("meta")
    shadows = ShadowValues()
    assert shadows.attach_batch(batch_spec, ((), kwargs)) == 2
    assert shadows.value(kwargs["attention_mask"]).tolist() == [[1] * 8] * 2
    with shadows:
        mask = kwargs["attention_mask"]
        assert bool(mask.all())  # .item() on meta, answered from the value
        ends = mask[:, [-1, 0]]
        assert shadows.value(ends).tolist() == [[1, 1], [1, 1]]
        assert 0 not in ends  # Tensor.__contains__: (ends == 0).any().item()
        ones = torch.ones(2, 3, device="meta")  # a float constant fill: BioGPT's default mask
        assert bool(ones.all())


def test_declared_no_zero_answers_the_idefics_padding_test():
    """Idefics 2/3 and SmolVLM get_image_features (modeling_idefics3.py) keep the images that are not all padding:
    ``real_images_inds = (pixel_values == 0.0).sum(dim=(-1, -2, -3)) != C*H*W``. With the recipe's fact "no element
    of pixel_values is 0.0" every comparison with 0 is False, every image is real: 2 samples x 3 images -> counts
    [3, 3] and all 6 images selected. 2*3*3*256*256 = 1,179,648 values, above the 2**20 shadow cap: the answer is
    one element broadcast, so the size does not matter."""
    from memgraph.model_spec.inputs import Batch
    from memgraph.model_spec.multimodal_inputs import ImageInput

    b, n, c, h, w = 2, 3, 3, 256, 256
    assert b * n * c * h * w > 1 << 20
    batch_spec = Batch((ImageInput("pixel_values", (b, n, c, h, w), torch.float32),), {})
    _, kwargs = batch_spec.make("meta")
    sv = ShadowValues()
    assert sv.attach_batch(batch_spec, ((), kwargs)) == 1 and sv.value(kwargs["pixel_values"]) is None
    with sv:
        pixels = kwargs["pixel_values"].to(torch.bfloat16).view(b * n, c, h, w)  # a cast keeps non-zero values
        assert sv.has_no_zero(pixels)
        zeros = (pixels == 0.0).sum(dim=(-1, -2, -3))
        assert sv.value(zeros).tolist() == [0] * 6
        real = zeros != c * h * w
        per_sample = real.view(b, n).sum(dim=1)
        assert per_sample.tolist() == [3, 3]  # .tolist(): what the features are split by
        kept = pixels[real]
        assert kept.shape == (6, c, h, w) and sv.has_no_zero(kept)
        assert sv.value(pixels != 0).all()
        assert not sv.has_no_zero(pixels.to(torch.int64))  # 0.3 -> 0: the fact ends at an integer cast
        assert sv.value(pixels == 1.0) is None  # only the comparison with 0 is known
    assert sv.declared == {"pixel_values": 2}
    (note,) = sv.assumption_notes()
    assert note.startswith("assumed: every image is a real image, none is padding: 2 comparisons of pixel_values")


def test_floats_without_the_fact_still_fail_the_padding_test():
    pixels = torch.empty(2, 3, 8, 8, device="meta")
    with ShadowValues() as sv:
        real = (pixels == 0.0).sum(dim=(-1, -2, -3)) != 3 * 8 * 8
        assert sv.value(real) is None
        with pytest.raises(NotImplementedError):
            pixels[real]  # boolean index without values: the meta kernel's nonzero error, as before
    assert sv.assumption_notes() == []


def test_like_fills_and_tuple_index_writes_keep_values():
    # UDOP's patch mask (modeling_udop.py combine_image_text_embeddings): full_like of a float activation, .bool(),
    # then mask[rows, cols] = False with rows/cols tuples of 0-d tensors from zip(*ind); the kept patches per sample
    # are 16 - (distinct patches hit): boxes centred on patches 3 and 3 (sample 0) and 5 and 9 (sample 1)
    from memgraph.trace.shadow_values import ShadowValues

    shadows = ShadowValues()
    emb = torch.empty(2, 16, 8, device="meta")
    hits = torch.empty(2, 2, dtype=torch.int64, device="meta")
    with shadows:
        shadows.attach(hits, torch.tensor([[3, 3], [5, 9]]))
        mask = torch.full_like(emb[:, :, 0], True).bool()
        assert shadows.value(mask) is not None and shadows.value(mask).all()
        ind = torch.stack([torch.arange(2)[:, None].repeat(1, 2).to(hits), hits], dim=-1).flatten(0, 1)
        rows, cols = zip(*ind)
        mask[rows, cols] = False
        kept = [emb[i][mask[i]] for i in range(2)]
    assert [k.shape[0] for k in kept] == [16 - 1, 16 - 2]


def test_packed_mask_channel_is_read_back_from_a_cat():
    """GLM-5 Next's indexer (modeling_glm5_next.py ``Glm5NextIndexer``): ``cat([k, gate, mask.to(float)[..., None]],
    -1)``, through a cache's ``cat([empty, packed], 1)``, then ``packed[..., -1].bool()`` and ``split(...)`` read the
    mask back; the keys have no values, the mask channel has (trace/slice_shadows.py)."""
    sv = ShadowValues()
    mask = torch.empty(2, 5, dtype=torch.long, device="meta")
    sv.attach(mask, torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]))
    k = torch.empty(2, 5, 4, device="meta")
    with sv:
        packed = torch.cat([k, k, mask.to(torch.float32)[..., None]], dim=-1)  # [2, 5, 4 + 4 + 1]
        packed = torch.cat([torch.empty(0, device="meta"), packed], dim=1)  # DynamicCache.update_indexer
        valid = packed[..., -1].bool()
        assert sv.value(valid).tolist() == [[False, False, True, True, True], [True] * 5]
        keys, gate, channel = torch.split(packed, [4, 4, 1], dim=-1)
        assert sv.value(channel.bool().squeeze(-1)).tolist() == sv.value(valid).tolist()
        assert sv.value(keys) is None and sv.value(packed[..., 3:5]) is None  # keys; a slice across two parts
        assert k[valid].shape == (3 + 5, 4)  # boolean index: 3 valid keys in row 0, 5 in row 1
