def compute_score(agent_answer, ground_truth, **kwargs):
    return 1.0 if str(agent_answer).strip().lower() == str(ground_truth).strip().lower() else 0.0
