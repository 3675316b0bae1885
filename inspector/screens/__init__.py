from inspector.screens.goto import GoToTurnScreen
from inspector.screens.help import HelpScreen
from inspector.screens.save import SaveScreen

__all__ = ["GoToTurnScreen", "HelpScreen", "SaveScreen"]
