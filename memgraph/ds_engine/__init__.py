"""DeepSpeed's own engine on meta (``--deepspeed ds_config.json``): config.py reads the user's config and resolves
Hugging Face's ``"auto"`` values, run.py wraps the model with ``deepspeed.initialize`` as one rank, buffers.py names
the buffers DeepSpeed keeps. DeepSpeed is optional (``pip install memgraph[deepspeed]``) and only imported here."""
