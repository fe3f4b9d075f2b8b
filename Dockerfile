# Runner image for Hugging Face Jobs (`python -m pipeline submit`): this repository
# installed with pip (the card template and the demo samples are package data). Build
# it as a Docker Space named <namespace>/survey-reading-lists-runner (the default --image of `submit`), or push it
# to any registry and pass --image.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY pipeline ./pipeline
RUN pip install --no-cache-dir -c constraints.txt .
ENV PYTHONUNBUFFERED=1
CMD ["python", "-m", "pipeline", "--help"]
