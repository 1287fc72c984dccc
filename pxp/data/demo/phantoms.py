"""Synthetic chest-radiograph phantoms for the five RAD findings (DESIGN §6).

Not real patients: each image is drawn from simple geometry with numpy and Pillow,
deterministically from a seed, and carries a "SYNTHETIC" marker burned into it.
A phantom is an attenuation map (body, lungs, mediastinum, heart, spine, ribs,
clavicles, vessels) to which one finding is added:

- Cardiomegaly: cardiothoracic ratio (CTR) above 0.5 (others 0.40–0.47).
- Pleural Effusion: basal opacity with a meniscus rising laterally, blunting the
  costophrenic angle and hiding the hemidiaphragm.
- Pneumothorax: a visceral pleural line with no lung markings beyond it.
- Atelectasis: lobar volume loss (right upper lobe under an elevated fissure with
  tracheal shift, or left lower lobe behind the heart with a depressed hilum).
- Pneumonia: patchy airspace consolidation with air bronchograms.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from pxp.protocols.errors import PxpError

FINDINGS = ("Atelectasis", "Pneumonia", "Pleural Effusion", "Cardiomegaly", "Pneumothorax")
SHORT = {"Atelectasis": "ATCS", "Pneumonia": "PNUM", "Pleural Effusion": "PLEF",
         "Cardiomegaly": "CRDM", "Pneumothorax": "PNTX"}
SIZE = 256
THORAX = (0.175, 0.82)  # inner lateral margins of the thorax (x), for the CTR

Array = NDArray[np.float64]


class PhantomError(PxpError, ValueError):
    """A phantom finding pxp does not draw."""


@dataclass(frozen=True)
class Phantom:
    """A drawn phantom: PNG bytes, its finding, and the facts the report states."""

    png: bytes
    finding: str
    facts: dict[str, Any]


def _grid(n: int) -> tuple[Array, Array]:
    yy, xx = np.mgrid[0:n, 0:n].astype(np.float64)
    return (yy + 0.5) / n, (xx + 0.5) / n


def _soft(d: Array, width: float) -> Array:
    """1 inside (d < 0), 0 outside, with a smooth edge of `width` (normalised units)."""
    return np.asarray(0.5 - 0.5 * np.tanh(d / max(width, 1e-6)), dtype=np.float64)


def _ellipse(y: Array, x: Array, cy: float, cx: float, ry: float, rx: float) -> Array:
    return np.asarray(np.sqrt(((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2), dtype=np.float64)


def _lines(n: int, paths: list[tuple[list[tuple[float, float]], int]], blur: float) -> Array:
    """Polylines (normalised points, pixel width) drawn into a [0, 1] layer."""
    layer = Image.new("L", (n, n), 0)
    draw = ImageDraw.Draw(layer)
    for pts, width in paths:
        draw.line([(px * n, py * n) for px, py in pts], fill=255, width=width, joint="curve")
    if blur > 0:
        layer = layer.filter(ImageFilter.GaussianBlur(blur))
    return np.asarray(layer, dtype=np.float64) / 255.0


def _tree(rng: np.random.Generator, x: float, y: float, angle: float, length: float,
          width: int, depth: int, out: list[tuple[list[tuple[float, float]], int]]) -> None:
    """Branching vessels (or bronchi) from a hilum, thinning toward the periphery."""
    x2 = x + length * math.cos(angle)
    y2 = y + length * math.sin(angle)
    out.append(([(x, y), (x2, y2)], max(1, width)))
    if depth <= 0:
        return
    for turn in (-1, 1):
        spread = float(rng.uniform(0.25, 0.6))
        _tree(rng, x2, y2, angle + turn * spread, length * float(rng.uniform(0.62, 0.8)),
              width - 1, depth - 1, out)


def _noise(rng: np.random.Generator, n: int, cells: int) -> Array:
    base = rng.random((cells, cells))
    im = Image.fromarray((base * 255).astype(np.uint8)).resize((n, n), Image.Resampling.BICUBIC)
    return np.asarray(im, dtype=np.float64) / 255.0


def draw_phantom(finding: str, seed: int, n: int = SIZE) -> Phantom:
    """Draw one phantom with `finding`, deterministically from `seed`."""
    img, facts = phantom_image(finding, seed, n)
    pil = Image.fromarray(np.round(img * 235 + 8).astype(np.uint8), mode="L")
    draw = ImageDraw.Draw(pil)
    font = ImageFont.load_default_imagefont()
    draw.text((int(n * 0.04), int(n * 0.04)), "R", fill=250, font=font)
    draw.text((int(n * 0.04), int(n * 0.93)), "SYNTHETIC", fill=250, font=font)
    buf = io.BytesIO()
    pil.save(buf, format="PNG", optimize=True)
    return Phantom(png=buf.getvalue(), finding=finding, facts=facts)


def phantom_image(finding: str, seed: int, n: int = SIZE) -> tuple[Array, dict[str, Any]]:
    """The phantom's grey image (n × n, 0 black to 1 white: dense is bright) and the facts its report states."""
    if finding not in FINDINGS:
        raise PhantomError(f"unknown finding {finding!r}")
    rng = np.random.default_rng(seed)
    y, x = _grid(n)
    edge = 1.2 / n
    facts: dict[str, Any] = {}

    side = "right" if rng.random() < 0.5 else "left"
    facts["side"] = side
    ctr = float(rng.uniform(0.56, 0.66)) if finding == "Cardiomegaly" else float(
        rng.uniform(0.40, 0.47))
    facts["ctr"] = round(ctr, 2)
    variant = ("upper" if rng.random() < 0.5 else "lower") if finding == "Atelectasis" else ""
    if variant:
        facts["lobe"] = "right upper lobe" if variant == "upper" else "left lower lobe"
        facts["side"] = side = "right" if variant == "upper" else "left"

    trachea_x = 0.5 + (-0.03 if variant == "upper" else 0.0)
    dome_r = 0.69 - (0.035 if variant == "upper" else 0.0) + float(rng.uniform(-0.01, 0.01))
    dome_l = 0.715 + float(rng.uniform(-0.01, 0.01))
    hilum_r = (0.415, 0.40 if variant == "upper" else 0.45)
    hilum_l = (0.59, 0.52 if variant == "lower" else 0.46)

    # body, lungs (above the diaphragm domes), then the mediastinal silhouette
    body = _soft((np.abs(x - 0.5) / 0.47) ** 3 + (np.abs(y - 0.6) / 0.6) ** 3 - 1, 0.02)
    a = 0.8 * body
    dome = np.where(x < 0.5, dome_r - 0.05 * np.clip(1 - ((x - 0.32) / 0.17) ** 2, 0, 1),
                    dome_l - 0.05 * np.clip(1 - ((x - 0.68) / 0.16) ** 2, 0, 1))
    shape_r = _soft(_ellipse(y, x, 0.47, 0.32, 0.31, 0.145) - 1, 0.006)
    shape_l = _soft(_ellipse(y, x, 0.48, 0.68, 0.31, 0.14) - 1, 0.006)
    lung_r = shape_r * _soft(y - dome, edge)
    lung_l = shape_l * _soft(y - dome, edge)
    a -= 0.52 * (lung_r + lung_l)
    heart_w = ctr * (THORAX[1] - THORAX[0])
    heart_cx = 0.53 + (0.02 if variant == "lower" else 0.0)
    heart = _soft(_ellipse(y, x, 0.655, heart_cx, 0.115, heart_w / 2) - 1, 0.006)
    upper = _soft(np.abs(x - 0.5) - 0.055, 0.008) * _soft(y - 0.6, 0.02)
    knob = _soft(_ellipse(y, x, 0.33, 0.56, 0.035, 0.035) - 1, 0.008)
    silhouette = np.maximum(np.maximum(heart, upper), knob)
    a = a * (1 - silhouette) + 1.35 * silhouette
    a += 0.22 * _soft(np.abs(x - 0.5) - 0.03, 0.006)  # spine
    a -= 0.05 * _soft(np.abs(np.mod(y, 0.047) - 0.0235) - 0.003, 0.002) * _soft(
        np.abs(x - 0.5) - 0.03, 0.006)
    a -= 0.3 * _soft(np.abs(x - trachea_x) - 0.012, 0.004) * _soft(y - 0.37, 0.01) * body
    a += 0.12 * _soft(_ellipse(y, x, hilum_r[1], hilum_r[0], 0.04, 0.03) - 1, 0.02)
    a += 0.12 * _soft(_ellipse(y, x, hilum_l[1], hilum_l[0], 0.04, 0.03) - 1, 0.02)
    a -= 0.35 * _soft(_ellipse(y, x, 0.785, 0.69, 0.03, 0.055) - 1, 0.01)  # gastric bubble

    # bones: posterior ribs and clavicles
    ribs: list[tuple[list[tuple[float, float]], int]] = []
    for i in range(9):
        y0 = 0.13 + 0.062 * i
        for sgn in (-1, 1):
            pts = []
            for t in np.linspace(0, 1, 12):
                px = 0.5 + sgn * (0.03 + 0.3 * t)
                py = y0 - 0.03 * math.sin(math.pi * t * 0.8) + 0.07 * t * t
                pts.append((px, py))
            ribs.append((pts, max(3, n // 64)))
    a += 0.1 * _lines(n, ribs, 1.0) * _soft(_ellipse(y, x, 0.6, 0.5, 0.58, 0.47) - 1, 0.01)
    clav = [([(0.465, 0.165), (0.33, 0.13), (0.17, 0.115)], max(4, n // 40)),
            ([(0.535, 0.165), (0.67, 0.13), (0.83, 0.115)], max(4, n // 40))]
    a += 0.28 * _lines(n, clav, 1.2)

    # vessels from the hila, fading toward the periphery
    vessels: list[tuple[list[tuple[float, float]], int]] = []
    for hx, hy, base in ((hilum_r[0], hilum_r[1], math.pi), (hilum_l[0], hilum_l[1], 0.0)):
        for k in range(5):
            ang = base + (-1 if base == 0.0 else 1) * float(rng.uniform(-1.3, 1.3)) + (
                0.0 if k else 0.4)
            _tree(rng, hx, hy, ang, float(rng.uniform(0.06, 0.09)), 3, 4, vessels)
    fade = np.clip(1.2 - 3.2 * np.minimum(np.hypot(x - hilum_r[0], y - hilum_r[1]),
                                          np.hypot(x - hilum_l[0], y - hilum_l[1])), 0, 1)
    vessel_map = _lines(n, vessels, 0.8) * fade

    lungs = lung_r + lung_l
    markings = np.ones_like(a)

    if finding == "Pleural Effusion":
        lung = lung_r if side == "right" else lung_l
        lat, med = (0.175, 0.44) if side == "right" else (0.82, 0.56)
        level = float(rng.uniform(0.5, 0.62))
        facts["size"] = "moderate" if level < 0.56 else "small"
        t = np.clip((x - lat) / (med - lat), 0, 1)
        top = level + 0.11 * (1 - (1 - t) ** 3)
        hemi = shape_r if side == "right" else shape_l
        fluid = _soft(top - y, 0.004) * hemi * (1 - silhouette) * _soft(y - 0.775, 0.004)
        a = a * (1 - fluid) + fluid * (0.92 * np.clip(0.8 + 1.5 * (y - level), 0.8, 1.0))
        markings *= 1 - fluid
    elif finding == "Pneumothorax":
        lung = lung_r if side == "right" else lung_l
        f = float(rng.uniform(0.25, 0.4))
        facts["collapse_pct"] = round(f * 100)
        facts["size"] = "large" if f > 0.33 else "moderate"
        cx, rx = (0.32, 0.145) if side == "right" else (0.68, 0.14)
        hx = hilum_r[0] if side == "right" else hilum_l[0]
        ccx = cx + (hx - cx) * f * 0.9
        e = _ellipse(y, x, 0.5, ccx, 0.3 * (1 - 0.45 * f), rx * (1 - f))
        collapsed = _soft(e - 1, 0.004)
        space = lung * (1 - collapsed)
        a -= 0.12 * space
        a += 0.05 * collapsed * lung
        a += 0.3 * np.exp(-(((e - 1) * rx * (1 - f) * n / 0.9) ** 2)) * lung
        markings *= 1 - space
    elif finding == "Atelectasis":
        if variant == "upper":
            t = np.clip((0.41 - x) / (0.41 - 0.17), 0, 1)
            fissure = 0.40 - 0.13 * t - 0.035 * np.sin(np.pi * t)
            lobe = _soft(y - fissure, 0.003) * lung_r
            a += 0.5 * lobe * np.clip(0.7 + 2 * (fissure - y), 0.7, 1.0)
            a += 0.15 * np.exp(-(((y - fissure) * n / 1.2) ** 2)) * lung_r
            markings *= 1 - lobe
        else:
            # triangle behind the heart: hilum down to the medial left hemidiaphragm
            sail = (x - 0.55) - (y - hilum_l[1]) * (0.74 - 0.55) / (0.74 - hilum_l[1])
            lobe = _soft(sail, 0.003) * _soft(hilum_l[1] - y, 0.01) * _soft(0.53 - x, 0.005)
            lobe *= shape_l
            a += 0.3 * lobe
            markings *= 1 - lobe * lung_l
    elif finding == "Pneumonia":
        lung = lung_r if side == "right" else lung_l
        zone = "lower" if rng.random() < 0.6 else "middle"
        facts["zone"] = zone
        cx = 0.29 if side == "right" else 0.71
        cy = 0.6 if zone == "lower" else 0.47
        field = np.zeros_like(a)
        for _ in range(7):
            bx = cx + float(rng.uniform(-0.08, 0.08))
            by = cy + float(rng.uniform(-0.06, 0.06))
            s = float(rng.uniform(0.025, 0.05))
            field += np.exp(-(((x - bx) ** 2 + (y - by) ** 2) / (2 * s * s)))
        patch = np.clip(field * (0.55 + 0.9 * _noise(rng, n, 14)) - 0.35, 0, 1) * lung
        a += 0.5 * patch
        bronchi: list[tuple[list[tuple[float, float]], int]] = []
        start_x = cx + (0.1 if side == "right" else -0.1)
        _tree(rng, start_x, cy - 0.05, math.atan2(0.05, cx - start_x), 0.05, 2, 3, bronchi)
        a -= 0.22 * _lines(n, bronchi, 0.5) * np.clip(patch * 2, 0, 1)

    a += 0.2 * vessel_map * lungs * markings
    a += 0.06 * (_noise(rng, n, 12) - 0.5)
    a += 0.008 * rng.standard_normal(a.shape)
    img = np.asarray(1 - np.exp(-1.5 * np.clip(a, 0, None)), dtype=np.float64)
    return img, facts


def report(finding: str, facts: dict[str, Any]) -> str:
    """The templated report of a phantom: findings, then an impression."""
    side = facts.get("side", "right")
    ctr = f"{facts.get('ctr', 0.44):.2f}"
    if finding == "Cardiomegaly":
        return (f"Frontal chest radiograph. The cardiac silhouette is enlarged, with a "
                f"cardiothoracic ratio of {ctr}, above 0.50. The lungs are clear and the "
                "costophrenic angles are sharp. Impression: cardiomegaly.")
    if finding == "Pleural Effusion":
        return (f"Frontal chest radiograph. Homogeneous opacity at the {side} base with a "
                f"concave upper border (meniscus) rising laterally, blunting the {side} "
                f"costophrenic angle and obscuring the {side} hemidiaphragm. Heart size "
                f"normal (cardiothoracic ratio {ctr}). Impression: {facts.get('size', 'moderate')} "
                f"{side} pleural effusion.")
    if finding == "Pneumothorax":
        return (f"Frontal chest radiograph. A thin visceral pleural line is visible in the "
                f"{side} hemithorax with absent lung markings beyond it; the {side} lung is "
                f"partly collapsed (about {facts.get('collapse_pct', 30)}% of the hemithorax "
                f"width). No mediastinal shift. Impression: {facts.get('size', 'moderate')} "
                f"{side} pneumothorax.")
    if finding == "Atelectasis":
        if facts.get("lobe") == "right upper lobe":
            return ("Frontal chest radiograph. Dense opacity in the right upper zone bounded "
                    "below by an elevated, upwardly bowed horizontal fissure, with volume loss: "
                    "the trachea is pulled to the right and the right hilum and hemidiaphragm "
                    f"are elevated. Cardiothoracic ratio {ctr}. Impression: right upper lobe "
                    "atelectasis (lobar collapse).")
        return ("Frontal chest radiograph. Triangular retrocardiac opacity with a sharp lateral "
                "border and loss of the medial left hemidiaphragm outline; the left hilum is "
                f"depressed, indicating volume loss. Cardiothoracic ratio {ctr}. Impression: "
                "left lower lobe atelectasis (lobar collapse).")
    if finding == "Pneumonia":
        zone = facts.get("zone", "lower")
        return (f"Frontal chest radiograph. Patchy, ill-defined airspace consolidation in the "
                f"{side} {zone} zone with air bronchograms. No volume loss and no pleural "
                f"effusion; heart size normal (cardiothoracic ratio {ctr}). Impression: {side} "
                f"{zone} zone pneumonia.")
    raise PhantomError(f"unknown finding {finding!r}")
