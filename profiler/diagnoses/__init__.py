"""Diagnoses: findings and fixes as rules kept as data, over facts from the analysis.

``engine`` holds the rule type and its evaluation; ``performance`` the rules about where a
step's time goes; ``efficiency`` the rules about training efficiency (loss against work).
"""
