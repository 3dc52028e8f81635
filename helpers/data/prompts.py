"""The reference prompt: the question between the report's prefix and suffix, after worked examples where asked, as
a chat turn for models with a chat template.
"""

from __future__ import annotations

from helpers.data.arithmetic import worked_examples
from helpers.data.problems import DataError

PROMPT_PREFIX = "Can you solve the following math problem? "


PROMPT_SUFFIX = " Please reason step by step, and put your final answer within \\boxed{}."


def prompt_text(question: str) -> str:
    """The reference prompt of 'Reasoning with Sampling' around one question."""
    return PROMPT_PREFIX + question.strip() + PROMPT_SUFFIX


def chat_ids(tokenizer, messages: list[dict]) -> list[int]:
    """Token ids of `messages` through the chat template, ready for the assistant's turn.

    transformers 4 returns a list of ids; transformers 5 a BatchEncoding (a mapping that is not a dict).
    """
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys") and "input_ids" in ids:
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def build_prompt(tokenizer, question: str, chat: bool | None = None, shots: int = 0) -> list[int]:
    """Token ids of the reference prompt: through the chat template for instruct models, raw text otherwise.

    `shots` > 0 puts that many worked arithmetic examples first (as earlier chat turns, or as text blocks),
    which a very small model needs before it follows the \\boxed{} format.
    """
    if not isinstance(question, str) or not question.strip():
        raise DataError("The question is empty.")
    if shots < 0:
        raise DataError(f"shots must be 0 or more, got {shots}.")
    examples = worked_examples(shots)
    has_template = bool(getattr(tokenizer, "chat_template", None))
    chat = has_template if chat is None else chat
    if chat and not has_template:
        raise DataError("This tokenizer has no chat template; build the prompt as raw text (chat=False).")
    if chat:
        messages = []
        for ex in examples:
            messages += [{"role": "user", "content": prompt_text(ex.question)},
                         {"role": "assistant", "content": ex.solution}]
        messages.append({"role": "user", "content": prompt_text(question)})
        return chat_ids(tokenizer, messages)
    text = "".join(f"{prompt_text(ex.question)}\n{ex.solution}\n\n" for ex in examples) + prompt_text(question) + "\n"
    return tokenizer(text)["input_ids"]
