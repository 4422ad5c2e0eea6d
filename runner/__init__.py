"""The reference MTP engine: scheduler, runner, drafter and verifier on torch.

specguard's first customer: it uses the contracts and adapters exactly as vLLM or ATOM
would, and its fault catalogue reproduces real bugs of this family on demand.
"""
