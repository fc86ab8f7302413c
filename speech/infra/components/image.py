"""The container image, built from the Dockerfile of the backend the weights need, and pushed to
the stack's ECR repository: container/Dockerfile (GPU: CUDA torch + kokoro, BACKEND=torch) or
container/Dockerfile.cpu (CPU: slim Python, onnxruntime, no CUDA or torch, BACKEND=onnx).

pulumi-docker-build (BuildKit) builds it during ``pulumi up``; its ``digest`` output is what the
Model runs (``<repository url>@<digest>``) and what ``/ping`` reports through IMAGE_DIGEST, so
the digest bench measures is the digest deployed.

Pushed by digest, with no tag: the repository keeps tags immutable, and a tag named after the
build context collides as soon as the same context is built twice into different bytes (builds are
not bit-reproducible: another machine, a revert A -> B -> A), which ECR refuses. A push by digest
names nothing that can already exist; the Model runs ``<repository>@<digest>`` either way. The
context hash stays on the image as the OCI label ``speech.context``.

Never built on preview (``build_on_preview=False``): a preview needs no Docker daemon and does not
build the multi-GB CUDA image; the digest is unknown there and checked against the measurements at
``pulumi up``, before the Model (speech.infra.components.model).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

ROOT = Path(__file__).resolve().parents[3]
CONTEXT = "."
DOCKERFILE = "container/Dockerfile"
"""The GPU image (BACKEND=torch)."""
DOCKERFILE_CPU = "container/Dockerfile.cpu"
"""The CPU image (BACKEND=onnx)."""
DOCKERFILES = {"torch": DOCKERFILE, "onnx": DOCKERFILE_CPU}


def dockerfile_for(backend: str) -> str:
    """The Dockerfile whose image has ``backend``'s runtime (torch: CUDA torch + kokoro; onnx: onnxruntime)."""
    return DOCKERFILES[backend]
CONTEXT_LABEL = "speech.context"
"""OCI label carrying :func:`context_tag` on the pushed image."""
PLATFORM = docker_build.Platform.LINUX_AMD64
"""SageMaker GPU and CPU instances are x86_64."""


def context_tag(dockerfile: str = DOCKERFILE, root: Path = ROOT) -> str:
    """``ctx-<12 hex>``: sha256 over the Dockerfile built and every file under container/ (what the
    image copies; .dockerignore keeps the rest of the repository out of the context)."""
    h = hashlib.sha256()
    h.update(dockerfile.encode() + b"\0")
    files = [root / dockerfile, root / ".dockerignore"] + sorted(
        p for p in (root / "container").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return f"ctx-{h.hexdigest()[:12]}"


class ContainerImageArgs:
    def __init__(self, *, repository: aws.ecr.Repository, tag: str, backend: str = "torch") -> None:
        self.repository = repository
        """The stack's ECR repository (IMMUTABLE tags, scan on push)."""
        self.tag = tag
        """:func:`context_tag` of the Dockerfile built: the image's ``speech.context`` label (not a registry tag)."""
        self.backend = backend
        """The backend the Model runs (speech.deploy.weights): picks the Dockerfile (:data:`DOCKERFILES`)."""


class ContainerImage(pulumi.ComponentResource):
    image: docker_build.Image
    uri: pulumi.Output[str]
    """``<repository url>@sha256:...``: what the SageMaker Model pulls."""
    digest: pulumi.Output[str]

    def __init__(self, name: str, args: ContainerImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("speech:index:ContainerImage", name, None, opts)
        repo = args.repository
        auth = aws.ecr.get_authorization_token_output(registry_id=repo.registry_id)
        self.image = docker_build.Image(
            f"{name}-image",
            push=False,
            build_on_preview=False,
            context=docker_build.BuildContextArgs(location=CONTEXT),
            dockerfile=docker_build.DockerfileArgs(location=dockerfile_for(args.backend)),
            platforms=[PLATFORM],
            labels={CONTEXT_LABEL: args.tag},
            exports=[docker_build.ExportArgs(image=docker_build.ExportImageArgs(
                names=[repo.repository_url], push=True, push_by_digest=True))],
            registries=[
                docker_build.RegistryArgs(
                    address=repo.repository_url.apply(lambda url: url.split("/", 1)[0]),
                    username=auth.user_name,
                    password=auth.password,
                )
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.digest = self.image.digest
        self.uri = pulumi.Output.concat(repo.repository_url, "@", self.image.digest)
        self.register_outputs({"uri": self.uri, "digest": self.digest})
