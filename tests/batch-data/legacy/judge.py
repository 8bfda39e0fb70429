# placeholder: an LLM judge task has a judge.py
