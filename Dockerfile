# Runner image for Hugging Face Jobs (`python -m pipeline submit`): this repository
# checked out and installed in editable mode, so `python -m pipeline ...` runs and the
# release stage finds data_cards/. Build it as a Docker Space named
# <namespace>/survey-reading-lists-runner (the default --image of `submit`), or push it
# to any registry and pass --image.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY pipeline ./pipeline
COPY data_cards ./data_cards
RUN pip install --no-cache-dir -c constraints.txt -e .
ENV PYTHONUNBUFFERED=1
CMD ["python", "-m", "pipeline", "--help"]
