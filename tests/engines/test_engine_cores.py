"""How the vLLM engine spreads rows over data-parallel engine cores (no vLLM needed)."""

from helpers.engines.vllm import engine_cores


def test_a_problems_rows_share_a_core_and_problems_go_round_the_cores():
    prompts = [[1, 2]] * 3 + [[3]] * 3 + [[4, 5]] * 3  # three problems, three chains each
    assert engine_cores(prompts, 2) == [0, 0, 0, 1, 1, 1, 0, 0, 0]
    assert engine_cores(prompts, 1) == [0] * 9


def test_with_fewer_problems_than_cores_the_rows_go_round():
    assert engine_cores([[7]] * 5, 2) == [0, 1, 0, 1, 0]
    assert engine_cores([[7], [8], [7]], 4) == [0, 1, 2]
