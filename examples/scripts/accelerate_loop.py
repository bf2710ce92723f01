"""A training loop with Hugging Face accelerate, as accelerate's nlp_example.py writes it: Accelerator with
mixed precision and gradient accumulation, prepare() of model, optimizer, data loader and scheduler,
accelerator.accumulate / backward / clip_grad_norm_, and accelerator.print of the loss. A BERT-style classifier
built from a config object in the script (no hub download)."""
import argparse

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", default="bf16" if torch.cuda.is_available() else "no")
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--seq_len", type=int, default=64)
parser.add_argument("--gradient_accumulation_steps", type=int, default=2)
args = parser.parse_args()

accelerator = Accelerator(mixed_precision=args.mixed_precision,
                          gradient_accumulation_steps=args.gradient_accumulation_steps)
config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=256, max_position_embeddings=128, num_labels=2)
model = BertForSequenceClassification(config)

g = torch.Generator().manual_seed(0)
input_ids = torch.randint(0, config.vocab_size, (64, args.seq_len), generator=g)
labels = torch.randint(0, 2, (64,), generator=g)
loader = DataLoader(TensorDataset(input_ids, torch.ones_like(input_ids), labels), batch_size=args.batch_size,
                    shuffle=True, pin_memory=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=100)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

model.train()
for epoch in range(2):
    for step, (ids, mask, y) in enumerate(loader):
        with accelerator.accumulate(model):
            outputs = model(input_ids=ids, attention_mask=mask, labels=y)
            loss = outputs.loss
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        if step % 4 == 0:
            accelerator.print(f"epoch {epoch} step {step}: loss {loss.item():.4f}")
