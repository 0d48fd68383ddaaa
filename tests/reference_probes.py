"""The authors' code of the generation-only probes, ported as the independent reference their docaudit
counterparts are checked against (tests/test_probes_reference.py). Each function names its source; the changes
are only those that take out the files, the Hugging Face ``Dataset`` and the API clients around the computation.

N-gram coverage: ``shallinan1/NGramCoverageAttack``, ``src/attacks/ngram_coverage_attack/compute_ngram_coverage.py``
(``Hypothesis``, ``find_exact_match``, ``process_single_doc``) and ``compute_creativity_index.py``
(``get_ngram_coverage``, ``compute_modified_creativity_index``). DE-COP: ``avduarte333/DE-COP_Method``,
``oversample_labels_fn.py`` (``generate_permutations``), ``2_decop_blackbox.py`` (``Query_LLM``'s prompts) and
``3_get_results_blackbox.py`` (``calculate_accuracy``)."""

from __future__ import annotations

from itertools import permutations

import pandas as pd
from nltk.tokenize.casual import casual_tokenize
from sacremoses import MosesDetokenizer
from unidecode import unidecode

md = MosesDetokenizer(lang="en")
tokenize_func = lambda x: casual_tokenize(x)  # noqa: E731 (as the authors write it)
detokenize = lambda x: md.detokenize(x)  # noqa: E731


class Hypothesis:
    """compute_ngram_coverage.py, ``Hypothesis`` (spans as dicts)."""

    def __init__(self, target_tokens, min_ngram):
        self.target_tokens = target_tokens
        self.min_ngram = min_ngram
        self.spans = []
        self.finished = False

    def add_span(self, new_span):
        self.spans.append(new_span)
        if new_span["end_index"] >= len(self.target_tokens):
            self.finished = True

    def replace_span(self, new_span):
        self.spans = self.spans[:-1] + [new_span]
        if new_span["end_index"] >= len(self.target_tokens):
            self.finished = True


def find_exact_match(tokens, min_ngram, source_texts):
    """compute_ngram_coverage.py, ``find_exact_match``: ``source_data.filter(lambda x: span_text in x['text'])``
    over the source documents, counted."""
    hypothesis = Hypothesis(tokens, min_ngram)
    first_pointer, second_pointer = 0, min_ngram
    while second_pointer <= len(tokens):
        span_text = detokenize(tokens[first_pointer:second_pointer])
        occurrence = len([t for t in source_texts if span_text in t])
        if occurrence:
            matched_span = {
                "start_index": first_pointer,
                "end_index": second_pointer,
                "span_text": span_text,
                "occurrence": occurrence,
            }
            if not hypothesis.spans:
                hypothesis.add_span(matched_span)
            else:
                last_span = hypothesis.spans[-1]
                if (
                    matched_span["start_index"] <= last_span["start_index"]
                    and last_span["end_index"] <= matched_span["end_index"]
                ):
                    hypothesis.replace_span(matched_span)
                else:
                    hypothesis.add_span(matched_span)
            second_pointer += 1
        else:
            if second_pointer - first_pointer > min_ngram:
                first_pointer += 1
            elif second_pointer - first_pointer == min_ngram:
                first_pointer += 1
                second_pointer += 1
            else:
                raise ValueError
    return hypothesis.spans


def process_generation(text, snippet_no_prompt, min_ngram=3):
    """compute_ngram_coverage.py, ``process_single_doc`` and ``main`` for one generation: the source document is
    ``unidecode(snippet_no_prompt)``."""
    tokenized_text = tokenize_func(unidecode(text))
    if len(tokenized_text) < min_ngram:
        return {"text": text, "matched_spans": []}
    return {"text": text, "matched_spans": find_exact_match(tokenized_text, min_ngram, [unidecode(snippet_no_prompt)])}


def get_ngram_coverage(text, spans, min_gram, ref_length, unique_coverages=False):
    """compute_creativity_index.py, ``get_ngram_coverage``."""
    tokens = casual_tokenize(unidecode(text))
    flags = [False for _ in tokens]
    seen = set()
    for span in spans:
        span_text = span["span_text"]
        span_length = span["end_index"] - span["start_index"]
        if span_length >= min_gram:
            if not unique_coverages or span_text not in seen:
                flags[span["start_index"] : span["end_index"]] = [True] * span_length
        seen.add(span_text)
    if len([f for f in flags if f]) == 0:
        coverage_gen, coverage_ref, coverage_total = 0, 0, 0
    else:
        ref_adjusted_length = max(len(flags), ref_length)
        coverage_gen = len([f for f in flags if f]) / len(flags)
        coverage_ref = len([f for f in flags if f]) / ref_adjusted_length
        coverage_total = (2 * len([f for f in flags if f])) / (len(flags) + ref_adjusted_length)
    return {
        "coverages_gen_length": coverage_gen,
        "coverages_ref_length": coverage_ref,
        "coverages_total_length": coverage_total,
    }


def compute_modified_creativity_index(outputs, min_ngram, max_ngram, ref_length, unique_coverages=False):
    """compute_creativity_index.py, ``compute_modified_creativity_index``."""
    total_coverages = []
    ngram_list = list(range(min_ngram, max_ngram + 1))
    for output in outputs:
        coverages = []
        for cur_ngram in ngram_list:
            coverage_dict = get_ngram_coverage(
                output["text"], output["matched_spans"], cur_ngram, ref_length, unique_coverages
            )
            coverages.append(coverage_dict)
        total_coverages.append(
            {key.replace("coverages", "creativities"): sum(d[key] for d in coverages) for key in coverages[0]}
        )
    return total_coverages


def reference_length(snippet_no_prompt):
    """compute_creativity_index.py, ``main``: ``len(tokenize_func(unidecode(cur_data["snippet_no_prompt"])))``."""
    return len(casual_tokenize(unidecode(snippet_no_prompt)))


def generate_permutations(document_df):
    """oversample_labels_fn.py, ``generate_permutations``, unchanged."""
    variables = [0, 1, 2, 3]
    permuted_variables = list(permutations(variables))
    results = []
    for perm in permuted_variables:
        fifth_variable_position = perm.index(0)
        fifth_variable = fifth_variable_position
        result_row = list(perm) + [fifth_variable]
        results.append(result_row)
    columns = variables + ["Answer"]
    base_permutations_df = pd.DataFrame(results, columns=columns)
    new_column_names = ["Example_A", "Example_B", "Example_C", "Example_D", "Answer"]
    base_permutations_df.columns = new_column_names
    multiplication_factor = len(document_df)
    full_base_permutations = pd.concat([base_permutations_df] * multiplication_factor, ignore_index=True)
    new_df_aux = pd.DataFrame(index=range(len(base_permutations_df)), columns=base_permutations_df.columns[:-1])
    new_df = pd.DataFrame(index=range(0), columns=base_permutations_df.columns[:-1])
    mapping = {0: "A", 1: "B", 2: "C", 3: "D"}
    for j in range(len(document_df)):
        for i in range(len(base_permutations_df)):
            new_df_aux.at[i, "Example_A"] = document_df.iloc[j, full_base_permutations.at[i, "Example_A"]]
            new_df_aux.at[i, "Example_B"] = document_df.iloc[j, full_base_permutations.at[i, "Example_B"]]
            new_df_aux.at[i, "Example_C"] = document_df.iloc[j, full_base_permutations.at[i, "Example_C"]]
            new_df_aux.at[i, "Example_D"] = document_df.iloc[j, full_base_permutations.at[i, "Example_D"]]
            new_df_aux.at[i, "True Answer"] = mapping[full_base_permutations.at[i, "Answer"]]
        new_df = pd.concat([new_df, new_df_aux], ignore_index=True)
    new_df["ID"] = document_df.at[0, "ID"]
    new_df["Label"] = document_df.at[0, "Label"]
    return new_df


QA_prompt = (
    "You are entering a multiple choice questions exam. You should directly answer each question by choosing the "
    "correct option. Be concise and straight to the point in your answer. Output only the letter corresponding to "
    "the correct answer."
)


def query_prompts(query_data, document_name, author_name):
    """2_decop_blackbox.py, ``Query_LLM`` (BookTection): the ChatGPT prompt and the Claude prompt, as sent."""
    extra_prompt = (
        f"""Question: Which of the following passages is verbatim from the \"{document_name}\" book by """
        f"""{author_name}?\nOptions:\n"""
    )
    chatgpt = (
        extra_prompt
        + "A. "
        + query_data[0]
        + "\n"
        + "B. "
        + query_data[1]
        + "\n"
        + "C. "
        + query_data[2]
        + "\n"
        + "D. "
        + query_data[3]
        + "\n"
        + "Answer: "
    )
    claude = (
        QA_prompt
        + extra_prompt
        + "A. "
        + query_data[0]
        + "\n"
        + "B. "
        + query_data[1]
        + "\n"
        + "C. "
        + query_data[2]
        + "\n"
        + "D. "
        + query_data[3]
    )
    return chatgpt, claude


def calculate_accuracy(row, row_name_1, row_name_2):
    """3_get_results_blackbox.py, ``calculate_accuracy``."""
    return 1 if row[row_name_1] == row[row_name_2] else 0
