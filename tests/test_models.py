"""The paper's models: exact parameter counts, forward/backward, the registry's errors."""

from __future__ import annotations

import pytest
import torch

from topkscope import models
from topkscope.models import count_parameters, create, detach_hidden


def gpt_count(vocab: int, layers: int, width: int, context: int) -> int:
    """Tied V x C embedding/output, T x C positions, per block LN 2C + qkv 3C^2+3C + attention
    output C^2+C + LN 2C + fc1 4C^2+4C + fc2 4C^2+C, final LN 2C."""
    c = width
    block = 2 * c + (3 * c * c + 3 * c) + (c * c + c) + 2 * c + (4 * c * c + 4 * c) + (4 * c * c + c)
    return vocab * c + context * c + layers * block + 2 * c


# Published parameter counts (10 classes for CIFAR, 1,000 for ImageNet, vocabulary 10,000);
# the GPTs' by the formula above (nanoGPT's baby GPT 6 x 384, context 256; the mini 2 x 64, 64).
PARAMETERS = {
    "fnn3": 199_210,
    "resnet20": 269_722,
    "resnet56": 853_018,
    "vgg16": 14_728_266,
    "lstm-ptb": 66_034_000,
    "lstm-ptb-small": 4_653_200,
    "resnet50": 25_557_032,
    "alexnet": 61_100_840,
    "gpt-ptb": 14_585_856,
    "gpt-mini": 744_192,
}

# A tiny input per classifier: (batch, shape) -- big models get small images.
INPUTS = {
    "fnn3": (3, (1, 28, 28)),
    "resnet20": (2, (3, 32, 32)),
    "resnet56": (2, (3, 32, 32)),
    "vgg16": (2, (3, 32, 32)),
    "resnet50": (2, (3, 64, 64)),
    "alexnet": (2, (3, 64, 64)),
}


def test_every_model_is_listed_and_counted():
    assert models.available() == sorted(PARAMETERS)


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_parameter_count(name):
    with torch.device("meta"):  # no memory, no initialisation cost
        model = create(name)
    assert count_parameters(model) == PARAMETERS[name]
    assert model.task == ("language_model" if name.startswith(("lstm", "gpt"))
                          else "classification")
    assert model.name == name


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_classifier_forward_backward(name):
    torch.manual_seed(0)
    model = create(name)
    batch, shape = INPUTS[name]
    x = torch.randn(batch, *shape)
    y = torch.arange(batch) % 10
    logits = model(x)
    classes = 1000 if name in ("resnet50", "alexnet") else 10
    assert logits.shape == (batch, classes) and torch.isfinite(logits).all()
    torch.nn.functional.cross_entropy(logits, y).backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
    assert any(float(p.grad.abs().sum()) > 0 for p in model.parameters())


@pytest.mark.parametrize("name", ["lstm-ptb-small", "lstm-ptb"])
def test_language_model_forward_backward_and_state(name):
    torch.manual_seed(0)
    model = create(name)
    tokens = torch.randint(0, 10_000, (3, 2))
    logits, hidden = model(tokens)
    assert logits.shape == (3, 2, 10_000)
    assert hidden[0].shape == hidden[1].shape == (2, 2, model.hidden_size)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
    loss.backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
    h0, c0 = model.init_hidden(2)
    assert float(h0.abs().sum()) == 0 and h0.shape == (2, 2, model.hidden_size)
    # eval: deterministic, and the carried state changes the next window's output
    model.eval()
    with torch.no_grad():
        a, state = model(tokens)
        b, _ = model(tokens)
        c, _ = model(tokens, detach_hidden(state))
    assert torch.equal(a, b) and not torch.allclose(a, c)


@pytest.mark.parametrize("hidden, layers, vocab", [(7, 1, 13), (16, 3, 101)])
def test_lstm_count_matches_the_formula(hidden, layers, vocab):
    model = create("lstm-ptb", hidden_size=hidden, num_layers=layers, vocab_size=vocab)
    lstm = layers * 4 * (2 * hidden * hidden + 2 * hidden)
    formula = vocab * hidden + lstm + hidden * vocab + vocab
    assert count_parameters(model) == formula


def test_gpt_published_counts_are_the_formula():
    assert PARAMETERS["gpt-ptb"] == gpt_count(10_000, 6, 384, 256)
    assert PARAMETERS["gpt-mini"] == gpt_count(10_000, 2, 64, 64)


@pytest.mark.parametrize("vocab, layers, heads, width, context",
                         [(13, 1, 1, 4, 3), (101, 3, 4, 16, 10)])
def test_gpt_count_matches_the_formula(vocab, layers, heads, width, context):
    model = create("gpt-ptb", vocab_size=vocab, layers=layers, heads=heads, width=width,
                   context=context)
    assert count_parameters(model) == gpt_count(vocab, layers, width, context)
    assert model.head.weight is model.token.weight  # tied: one matrix, counted once


def naive_gpt(model, x: torch.Tensor) -> torch.Tensor:
    """The GPT's forward pass written out in float64 with an explicit causal mask and
    explicit softmax, attention head by head (the reference for SDPA and the reshapes)."""
    f = torch.nn.functional
    w = {n: p.detach().double() for n, p in model.named_parameters()}
    T, B = x.shape
    idx = x.t()
    h = w["token.weight"][idx] + w["position.weight"][:T]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for i, block in enumerate(model.blocks):
        pre = f"blocks.{i}."
        a = f.layer_norm(h, (h.shape[-1],), w[pre + "ln1.weight"], w[pre + "ln1.bias"])
        qkv = a @ w[pre + "attn.qkv.weight"].t() + w[pre + "attn.qkv.bias"]
        C, H = h.shape[-1], block.attn.heads
        q, k, v = qkv.split(C, dim=-1)
        heads = []
        for j in range(H):
            sl = slice(j * C // H, (j + 1) * C // H)
            scores = q[..., sl] @ k[..., sl].transpose(1, 2) / (C // H) ** 0.5
            scores = scores.masked_fill(mask, float("-inf"))
            heads.append(torch.softmax(scores, -1) @ v[..., sl])
        att = torch.cat(heads, -1) @ w[pre + "attn.proj.weight"].t() + w[pre + "attn.proj.bias"]
        h = h + att
        m = f.layer_norm(h, (C,), w[pre + "ln2.weight"], w[pre + "ln2.bias"])
        m = f.gelu(m @ w[pre + "fc1.weight"].t() + w[pre + "fc1.bias"])
        h = h + m @ w[pre + "fc2.weight"].t() + w[pre + "fc2.bias"]
    h = f.layer_norm(h, (h.shape[-1],), w["ln_f.weight"], w["ln_f.bias"])
    return (h @ w["token.weight"].t()).transpose(0, 1)


def test_gpt_forward_matches_the_float64_reference_and_is_causal():
    torch.manual_seed(0)
    model = create("gpt-ptb", vocab_size=50, layers=2, heads=4, width=16, context=8, dropout=0.0)
    with torch.no_grad():  # non-trivial LayerNorm and bias values
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.normal_(0.0 if name.endswith("bias") else 1.0, 0.1)
    model.eval()
    x = torch.randint(0, 50, (7, 3))
    with torch.no_grad():
        logits = model(x)
        changed = x.clone()
        changed[4] = (changed[4] + 1) % 50  # a later token changes no earlier prediction
        other = model(changed)
    assert logits.shape == (7, 3, 50)
    torch.testing.assert_close(logits.double(), naive_gpt(model, x), rtol=1e-4, atol=1e-5)
    assert torch.equal(logits[:4], other[:4]) and not torch.allclose(logits[4:], other[4:])
    model.double()
    with torch.no_grad():
        torch.testing.assert_close(model(x), naive_gpt(model, x), rtol=1e-10, atol=1e-12)


def test_gpt_backward_reaches_every_parameter_and_the_tied_matrix_twice():
    torch.manual_seed(0)
    model = create("gpt-mini", vocab_size=40, width=8, heads=2, context=6)
    x = torch.randint(0, 40, (6, 2))
    logits = model(x)
    torch.nn.functional.cross_entropy(logits[:-1].flatten(0, 1), x[1:].flatten()).backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, \
            pname
    assert not hasattr(model, "init_hidden")  # stateless: the task carries nothing
    with pytest.raises(ValueError, match="a window of 7 tokens exceeds the context = 6"):
        model(torch.randint(0, 40, (7, 2)))


def test_fnn_count_matches_the_formula():
    model = create("fnn3", in_features=30, hidden=(5, 4), num_classes=3)
    assert count_parameters(model) == 30 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3


def test_option_a_shortcuts_have_no_parameters_and_pad_channels():
    model = create("resnet20")
    shortcut_params = [n for n, _ in model.named_parameters() if "shortcut" in n]
    assert shortcut_params == []
    block = model.blocks[3]  # first block of stage 2: 16 -> 32 channels, stride 2
    x = torch.randn(1, 16, 8, 8)
    out = block.shortcut(x)
    assert out.shape == (1, 32, 4, 4)
    assert torch.equal(out[:, 8:24], x[:, :, ::2, ::2])
    assert float(out[:, :8].abs().sum()) == 0 and float(out[:, 24:].abs().sum()) == 0


def test_overrides_change_the_model():
    assert create("resnet20", num_classes=100).fc.out_features == 100
    narrow = create("vgg16", width_multiplier=0.25)
    assert count_parameters(narrow) < PARAMETERS["vgg16"] / 10
    assert narrow(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert create("resnet56", in_channels=1)(torch.randn(2, 1, 32, 32)).shape == (2, 10)


def test_unknown_model_lists_available_names():
    with pytest.raises(ValueError, match="available: alexnet, fnn3, gpt-mini, gpt-ptb, lstm-ptb"):
        create("resnet18")


def test_unknown_override_lists_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown override\(s\) depth .*allowed: num_classes=10"):
        create("resnet20", depth=32)


@pytest.mark.parametrize(
    "name, kwargs, pattern",
    [
        ("lstm-ptb-small", {"dropout": 1.0}, r"dropout = 1.0 outside the allowed range \[0, 1\)"),
        ("vgg16", {"width_multiplier": 0}, r"width_multiplier = 0 outside \(0, 4\]"),
        ("resnet20", {"width": 1}, "width = 1 must be >= 2"),
        ("gpt-mini", {"width": 10, "heads": 4}, "width = 10 must be a multiple of heads = 4"),
        ("gpt-mini", {"context": 0}, "context = 0 must be >= 1"),
        ("gpt-ptb", {"dropout": -0.1}, r"dropout = -0.1 outside the allowed range \[0, 1\)"),
    ],
)
def test_bad_override_values(name, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        create(name, **kwargs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["resnet20", "lstm-ptb-small", "gpt-mini"])
def test_forward_backward_on_the_gpu(name):
    model = create(name).cuda()
    if name == "gpt-mini":
        logits = model(torch.randint(0, 10_000, (5, 4), device="cuda"))
    elif model.task == "language_model":
        hidden = model.init_hidden(4)
        assert hidden[0].device.type == "cuda"
        logits, _ = model(torch.randint(0, 10_000, (5, 4), device="cuda"), hidden)
    else:
        logits = model(torch.randn(4, 3, 32, 32, device="cuda"))
    logits.float().sum().backward()
    assert all(p.grad is not None and p.grad.is_cuda for p in model.parameters())
    assert torch.isfinite(logits).all()
