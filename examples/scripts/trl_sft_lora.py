"""Supervised fine-tuning with TRL's SFTTrainer and a PEFT LoRA adapter, as TRL's sft.py example writes it:
SFTConfig, a LoraConfig passed as peft_config, a datasets.Dataset of text, SFTTrainer(...).train(). The model is
a small Qwen2 built from a config object in the script and the tokenizer a word-level one (no hub download)."""
import argparse

import torch
from datasets import Dataset
from peft import LoraConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import SFTConfig, SFTTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--max_length", type=int, default=64)
parser.add_argument("--batch_size", type=int, default=2)
parser.add_argument("--lora_r", type=int, default=8)
args = parser.parse_args()

words = [f"w{i}" for i in range(400)]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<unk>", "<pad>", "<s>", "</s>"] + words)},
                                 unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>",
                                    eos_token="</s>")

config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                     pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
model = Qwen2ForCausalLM(config)

dataset = Dataset.from_dict({"text": [" ".join(words[(i * 11 + j) % len(words)] for j in range(args.max_length))
                                      for i in range(32)]})
peft_config = LoraConfig(r=args.lora_r, lora_alpha=16, lora_dropout=0.05, target_modules="all-linear",
                         task_type="CAUSAL_LM")
training_args = SFTConfig(output_dir="out-sft", per_device_train_batch_size=args.batch_size,
                          max_length=args.max_length, max_steps=10, learning_rate=2e-4, logging_steps=1,
                          save_strategy="no", report_to=[], bf16=torch.cuda.is_available(),
                          gradient_checkpointing=False)
trainer = SFTTrainer(model=model, args=training_args, train_dataset=dataset, processing_class=tokenizer,
                     peft_config=peft_config)
trainer.train()
