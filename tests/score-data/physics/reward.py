def compute_score(agent_answer, ground_truth, **kwargs):
    """Placeholder as the original's judged tasks: the judge scores these."""
    return 0.0
