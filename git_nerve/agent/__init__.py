"""`git-nerve-agent`: a tiny coding agent that ships with git-nerve.

A real, separate process: it reads its task on standard input, talks OpenAI
Chat Completions (tool calls) to any compatible endpoint (``--base-url`` or
``OPENAI_BASE_URL``; key in ``OPENAI_API_KEY``), runs the tools the model asks
for inside its working directory only (:mod:`.tools`), and prints the model's
final answer on standard output. Before each model request it takes the notes
a person queued for its task (`git nerve tell`), records them delivered to its
own pid and hands them to the model; once the model has answered them they are
recorded as acted on. When a ``stop`` is queued for its task it takes no
further step. It is what `git nerve demo` drives; it works with any model.
"""
