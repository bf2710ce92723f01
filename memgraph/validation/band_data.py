"""Written by memgraph.validation.band.write_band_data from the predicted rows of reports/published/:
(file, source, counter, model kind, measured bytes, predicted bytes). Do not edit: regenerate.
"""

ROWS = (
    ('litgpt-config-hub/falcon-7b-lora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 16690000000.000002, 18045170176),
    ('litgpt-config-hub/llama-2-7b-lora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 19770000000.0, 19686305280),
    ('litgpt-config-hub/llama-2-7b-qlora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 13680000000.0, 13145402880),
    ('litgpt-config-hub/llama-3-8b-lora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 19730000000.0, 19792841216),
    ('litgpt-config-hub/llama-3-8b-qlora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 17410000000.0, 16448417280),
    ('litgpt-config-hub/llama-3.1-8b-lora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 19730000000.0, 19792841216),
    ('litgpt-config-hub/llama-3.2-1b-lora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 4490000000.0, 4684347904),
    ('litgpt-config-hub/llama-3.2-1b-qlora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 5530000000.0, 5565562368),
    ('litgpt-config-hub/llama-3.2-3b-lora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 9670000000.0, 9781948928),
    ('litgpt-config-hub/llama-3.2-3b-qlora.json', 'LitGPT config_hub/finetune/README.md: config-file performance table (2024)', 'allocated', 'decoder LM', 10300000000.0, 9874791936),
    ('transformers-pr-32092-albert/b4-s256-eager.json', 'transformers PR #32092: Add sdpa support for Albert (training benchmark, 2024-07-20)', 'allocated', 'text encoder', 794206000.0, 780294144),
    ('transformers-pr-32092-albert/b4-s256-sdpa.json', 'transformers PR #32092: Add sdpa support for Albert (training benchmark, 2024-07-20)', 'allocated', 'text encoder', 717332000.0, 705398784),
    ('transformers-pr-32092-albert/b4-s512-eager.json', 'transformers PR #32092: Add sdpa support for Albert (training benchmark, 2024-07-20)', 'allocated', 'text encoder', 1664025000.0, 1662312448),
    ('transformers-pr-32092-albert/b4-s512-sdpa.json', 'transformers PR #32092: Add sdpa support for Albert (training benchmark, 2024-07-20)', 'allocated', 'text encoder', 1363268000.0, 1361514496),
)
