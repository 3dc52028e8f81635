"""The `layer-map` directive of the architecture page: the library's packages in layers and the path of one glued
number, drawn at build time by `helpers.runner.architecture` from `helpers.LAYERS` and the modules on disk."""

from __future__ import annotations

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


class LayerMap(SphinxDirective):
    """A figure (inline SVG) with a caption, and the numbered steps of the path beneath it."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from helpers.runner.architecture import flow_steps, layer_map_svg

        figure = nodes.raw("", f'<figure class="layer-map">{layer_map_svg()}</figure>', format="html")
        steps = nodes.enumerated_list()
        for step in flow_steps():
            package, _, what = step.partition(": ")
            item = nodes.list_item()
            paragraph = nodes.paragraph()
            paragraph += nodes.literal(text=f"{package}/")
            paragraph += nodes.Text(f": {what}")
            item += paragraph
            steps += item
        return [figure, steps]


def setup(app):
    app.add_directive("layer-map", LayerMap)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
