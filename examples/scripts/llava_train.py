"""A LLaVA-style image-text fine-tuning loop as LLaVA / its community forks write it: LlavaForConditionalGeneration
built from a LlavaConfig (CLIP vision tower + Llama language model, tiny, in the script), the vision tower frozen,
a custom collator that puts one <image> token per patch in the prompt, pads the batch and masks the prompt out of
the labels (-100), a plain PyTorch loop with bf16 autocast on CUDA, gradient clipping and AdamW."""
import argparse
import random

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=2)
parser.add_argument("--image_size", type=int, default=32)
parser.add_argument("--lr", type=float, default=2e-5)
args = parser.parse_args()
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
amp_dtype = torch.bfloat16 if device == "cuda" else None

IMAGE_TOKEN, PAD, VOCAB = 1, 0, 600
patch = 8
vision = CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                          image_size=args.image_size, patch_size=patch)
text = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, pad_token_id=PAD)
config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
                     vision_feature_layer=-2, vision_feature_select_strategy="full")
model = LlavaForConditionalGeneration(config)
num_image_tokens = (args.image_size // patch) ** 2  # "full": every patch, no CLS dropped... plus CLS below
num_image_tokens += 1  # CLIP's class token is kept by the "full" strategy


class ToyImageText(Dataset):
    """Stands for a LLaVA instruction set: (image, prompt ids, answer ids) with varied text lengths."""

    def __init__(self, n=32):
        rng = random.Random(0)
        self.items = [(torch.randn(3, args.image_size, args.image_size),
                       [rng.randrange(2, VOCAB) for _ in range(rng.randrange(8, 24))],
                       [rng.randrange(2, VOCAB) for _ in range(rng.randrange(4, 16))]) for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    """LLaVA's collator: <image> tokens + prompt + answer, right-padded; labels only on the answer."""
    seqs = [[IMAGE_TOKEN] * num_image_tokens + prompt + answer for _, prompt, answer in batch]
    longest = max(map(len, seqs))
    input_ids = torch.full((len(batch), longest), PAD, dtype=torch.long)
    labels = torch.full((len(batch), longest), -100, dtype=torch.long)
    attention_mask = torch.zeros((len(batch), longest), dtype=torch.long)
    for i, ((_, prompt, answer), seq) in enumerate(zip(batch, seqs)):
        input_ids[i, :len(seq)] = torch.tensor(seq)
        attention_mask[i, :len(seq)] = 1
        labels[i, len(seq) - len(answer):len(seq)] = torch.tensor(answer)
    pixel_values = torch.stack([image for image, _, _ in batch])
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels, "pixel_values": pixel_values}


model.model.vision_tower.requires_grad_(False)  # LLaVA stage 2: projector + language model train
model.to(device)
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0)
loader = DataLoader(ToyImageText(), batch_size=args.batch_size, shuffle=True, collate_fn=collate, pin_memory=True)

model.train()
for step, batch in enumerate(loader):
    batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    with torch.autocast(device_type="cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"step {step}: loss {loss.item():.4f}")
    if step == 9:
        break
