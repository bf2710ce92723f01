#!/usr/bin/env bash
# Regenerate the example reports in this folder (CPU only, about a minute each on 2 cores).
# MEMGRAPH="python -m memgraph" ./generate.sh runs another checkout's code than the installed console script.
set -euo pipefail
cd "$(dirname "$0")"
run() {  # run NAME ARGS...: one analysis, written as markdown, HTML and JSON (the format from each extension)
    local name=$1; shift
    ${MEMGRAPH:-memgraph} analyze "$@" --output "$name.md" --output "$name.html" --output "$name.json"
}
# GPU-faithfulness: where the peak of a mixed-precision Llama step comes from on an H100
run llama-2-7b-bf16-mixed-b1-s4096-sdpa-h100 llama-2-7b --batch-size 1 --seq-len 4096 --precision bf16-mixed --attn sdpa --gpu h100-80gb
# the same step with eager attention: the attention probabilities dominate
run llama-2-7b-bf16-mixed-b1-s4096-eager-h100 llama-2-7b --batch-size 1 --seq-len 4096 --precision bf16-mixed --attn eager --gpu h100-80gb
# multimodal: LLaVA stage 2 (projector + language model train, vision tower frozen) on an A100
run llava-1.5-7b-stage2-b16-s2048-bf16-mixed-a100 llava-1.5-7b --batch-size 16 --seq-len 2048 --precision bf16-mixed --stage 2 --gpu a100-80gb
# LLaVA stage 1 with gradient checkpointing and SDPA: what fits on one 80 GB card
run llava-1.5-7b-stage1-b16-s2048-bf16-mixed-sdpa-ckpt-h100 llava-1.5-7b --batch-size 16 --seq-len 2048 --precision bf16-mixed --stage 1 --attn sdpa --gradient-checkpointing --gpu h100-80gb
# Qwen2-VL: the image size sets the number of visual tokens
run qwen2-vl-2b-448x672-bf16-mixed-sdpa-h100 qwen2-vl-2b --batch-size 4 --seq-len 2048 --image-size 448x672 --precision bf16-mixed --attn sdpa --gpu h100-80gb
# Qwen2-VL with a video: 16 frames of 448 px are 8 temporal patches of 32x32, 2,048 video tokens; the video row
run qwen2-vl-2b-video16-448-b2-s4096-bf16-mixed-h100 qwen2-vl-2b --batch-size 2 --seq-len 4096 --image-size 448 --video-frames 16 --precision bf16-mixed --gpu h100-80gb
# an audio-language model: 30 s clips are 750 audio tokens each; the audio row
run qwen2-audio-7b-30s-b2-s1024-bf16-mixed-h100 qwen2-audio-7b --batch-size 2 --seq-len 1024 --audio-seconds 30 --precision bf16-mixed --gpu h100-80gb
# one report per multimodal family (per-modality table), each model built from its transformers config class's
# defaults (configs/*.json; no released checkpoint's config is stored here), 28-36 s each on 2 shared cores
# any-resolution: LLaVA-NeXT, a 336x672 image is 2 tiles of 336 px plus the whole image
run llava-next-defaults-336x672-b4-s2048-bf16-mixed-h100 configs/llava-next-defaults.json --batch-size 4 --seq-len 2048 --image-size 336x672 --precision bf16-mixed --gpu h100-80gb
# cross-attention: Mllama (Llama 3.2 Vision), an 896-px image on 2x2 tiles of 448 px, the text cross-attends to them
run mllama-defaults-896-b1-s512-bf16-mixed-h100 configs/mllama-defaults.json --batch-size 1 --seq-len 512 --image-size 896 --precision bf16-mixed --gpu h100-80gb
# Q-Former: InstructBLIP (ViT-g, a 32-query Q-Former, a Llama-7B-shaped language model); the qformer row
run instructblip-defaults-b4-s512-bf16-mixed-h100 configs/instructblip-defaults.json --batch-size 4 --seq-len 512 --precision bf16-mixed --gpu h100-80gb
# OCR / document: Pix2Struct, a 1024x768 page as up to 2,048 flattened patches; no projector
run pix2struct-defaults-1024x768-b4-s128-bf16-mixed-h100 configs/pix2struct-defaults.json --batch-size 4 --seq-len 128 --image-size 1024x768 --precision bf16-mixed --gpu h100-80gb
# a 24 GB card: does not fit; the HTML report's screenshot (headless Chromium, 1400 px wide)
run llama-2-7b-bf16-mixed-b1-s4096-rtx-4090 llama-2-7b --batch-size 1 --seq-len 4096 --precision bf16-mixed --gpu rtx-4090
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,2400 \
    --screenshot=llama-2-7b-bf16-mixed-b1-s4096-rtx-4090.png "file://$PWD/llama-2-7b-bf16-mixed-b1-s4096-rtx-4090.html"
# a small fp32 model
run gpt2-fp32-b8-s1024 gpt2 --batch-size 8 --seq-len 1024
