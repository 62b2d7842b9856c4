"""Worker and backstop plumbing: the long-lived helper processes (`python -m MODULE` over stdin and
stdout) that run upstream bytes under memory, CPU and time budgets: the analysis worker (transformers'
own config, tokenizer and generation code) and the chat-template render backstop."""
