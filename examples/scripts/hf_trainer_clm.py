"""Causal-LM fine-tuning with the Hugging Face Trainer, the way the transformers examples write it
(run_clm.py, shortened): a config object built in the script (no hub download), a tokenized in-memory dataset,
TrainingArguments, DataCollatorForLanguageModeling, Trainer.train(). On CUDA the Trainer trains in bf16 autocast
with its default fused AdamW; on the CPU in fp32."""
import argparse

import torch
from transformers import (DataCollatorForLanguageModeling, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast,
                          Trainer, TrainingArguments)
from tokenizers import Tokenizer, models, pre_tokenizers

parser = argparse.ArgumentParser()
parser.add_argument("--seq_len", type=int, default=64)
parser.add_argument("--batch_size", type=int, default=2)
parser.add_argument("--max_steps", type=int, default=10)
parser.add_argument("--gradient_checkpointing", action="store_true")
args = parser.parse_args()

# A word-level tokenizer over a toy vocabulary (a real run loads one with AutoTokenizer.from_pretrained)
words = [f"w{i}" for i in range(500)]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<unk>", "<pad>", "<s>", "</s>"] + words)},
                                 unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>",
                                    eos_token="</s>")

config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                     pad_token_id=tokenizer.pad_token_id)
model = LlamaForCausalLM(config)

texts = [" ".join(words[(i * 7 + j) % len(words)] for j in range(args.seq_len)) for i in range(64)]
train_dataset = [tokenizer(t, truncation=True, max_length=args.seq_len) for t in texts]

training_args = TrainingArguments(
    output_dir="out-clm", per_device_train_batch_size=args.batch_size, max_steps=args.max_steps,
    learning_rate=3e-4, warmup_steps=2, logging_steps=1, save_strategy="no", report_to=[],
    bf16=torch.cuda.is_available(), dataloader_pin_memory=True, seed=42,
    **({"gradient_checkpointing": True} if args.gradient_checkpointing else {}),
)
trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset,
                  data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
trainer.train()
