def create_prompt(problem_data):
    return "[%s] %s\nPut the answer in \\boxed{}." % (problem_data["domain"], problem_data["problem_statement"])
